#!/usr/bin/env python3
"""The Python peer of the NanoDet chain: the same TorchScript (tools/nanodet-to-torchscript.py)
driven as NanoDet's own demo drives its model (nanodet/util and gfl_head.py), with the frames
already on the GPU and the pre-processing there too, batches of frames through one forward:

- pre-processing: 1080p frames as uint8 BGR tensors on the GPU (one step ahead of cudanms's
  NV12), letterboxed into 416x416 with bilinear interpolation (F.interpolate, no antialiasing,
  as cv2.warpPerspective), black around, (x - mean) / std;
- the network: one forward of the batch;
- get_bboxes, image by image as NanoDet loops: per stride the 1000 cells of highest score
  (nms_pre), the distributions' integral (softmax, then the expected bin), distance2bbox clipped
  to the input; multiclass_nms: every class above the threshold, torchvision's batched_nms at IoU
  0.6, at most 100 boxes; warp_boxes back to the frame, clipped to it.

p50/p99 of the whole chain per batch, torch.cuda.synchronize() at the end, and the network alone.

    nanodet_bench_torch.py MODEL.pt [--frames RAW.bgr] [--batches 32] [--runs 100]
                           [--threshold 0.35] [--fp16] [--json FILE]
"""
import argparse
import json

import torch
import torch.nn.functional as F
import torchvision

from peer_bench import H, W, frames_of, timed

INPUT = 416
STRIDES = (8, 16, 32)
BINS = 11
MEAN = (103.53, 116.28, 123.675)  # BGR
STD = (57.375, 57.12, 58.395)


def centres(device):
    out = []
    for s in STRIDES:
        cells = (INPUT + s - 1) // s
        y, x = torch.meshgrid((torch.arange(cells, device=device) + 0.5) * s,
                              (torch.arange(cells, device=device) + 0.5) * s, indexing="ij")
        out.append((torch.stack([x.flatten(), y.flatten()], -1), s))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--frames")
    ap.add_argument("--batches", default="32")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--threshold", type=float, default=0.35)
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    dev = torch.device("cuda")
    bgr = torch.stack([torch.from_numpy(f.copy()).permute(2, 0, 1)
                       for f in frames_of(a.frames, max(batches))]).to(dev)  # B,3,H,W uint8
    model = torch.jit.load(a.model, map_location=dev).eval()
    if a.fp16:
        model = model.half()
    mean = torch.tensor(MEAN, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=dev).view(1, 3, 1, 1)
    ratio = min(INPUT / W, INPUT / H)
    nw, nh = round(W * ratio), round(H * ratio)
    px, py = (INPUT - nw) // 2, (INPUT - nh) // 2
    levels = centres(dev)
    project = torch.linspace(0, BINS - 1, BINS, device=dev)

    def preprocess(batch):
        x = F.interpolate(batch.float(), size=(nh, nw), mode="bilinear", align_corners=False)
        x = F.pad(x, (px, INPUT - nw - px, py, INPUT - nh - py), value=0.0)
        x = (x - mean) / std
        return x.half() if a.fp16 else x

    def get_bboxes_single(scores, distributions):
        boxes, level_scores, at = [], [], 0
        for (points, stride) in levels:
            n = points.shape[0]
            s, d = scores[at:at + n].float(), distributions[at:at + n].float()
            at += n
            if n > 1000:
                _, top = s.max(dim=1).values.topk(1000)
                points, s, d = points[top], s[top], d[top]
            d = F.softmax(d.reshape(-1, BINS), dim=1) @ project
            d = d.reshape(-1, 4) * stride
            b = torch.stack([points[:, 0] - d[:, 0], points[:, 1] - d[:, 1],
                             points[:, 0] + d[:, 2], points[:, 1] + d[:, 3]], -1).clamp(0, INPUT)
            boxes.append(b)
            level_scores.append(s)
        boxes, level_scores = torch.cat(boxes), torch.cat(level_scores)
        valid = level_scores > a.threshold
        keep_boxes = boxes[:, None].expand(-1, level_scores.shape[1], 4)[valid]
        keep_scores, labels = level_scores[valid], valid.nonzero()[:, 1]
        kept = torchvision.ops.batched_nms(keep_boxes, keep_scores, labels, 0.6)[:100]
        out = keep_boxes[kept]
        out = (out - torch.tensor([px, py, px, py], device=dev)) / ratio  # warp_boxes
        out[:, 0::2] = out[:, 0::2].clamp(0, W)
        out[:, 1::2] = out[:, 1::2].clamp(0, H)
        return out, keep_scores[kept], labels[kept]

    @torch.inference_mode()
    def chain(batch):
        scores, distributions = model(preprocess(batch))
        return [get_bboxes_single(scores[i], distributions[i]) for i in range(batch.shape[0])]

    @torch.inference_mode()
    def network(x):
        return model(x)

    print(f"NanoDet-g from Python as its demo drives it ({'fp16' if a.fp16 else 'fp32'}, torch "
          f"{torch.__version__}, torchvision {torchvision.__version__}, "
          f"{torch.cuda.get_device_name()})")
    print("| batch | chain p50 / p99 (ms) | frames/s | network alone p50 (ms) | boxes per frame |")
    print("|---:|---:|---:|---:|---:|")
    rows = []
    for batch in batches:
        x = bgr[:batch]
        p50, p99 = timed(chain, x, a.runs)
        net, _ = timed(network, preprocess(x), a.runs)
        boxes = sum(len(r[0]) for r in chain(x)) / batch
        print(f"| {batch} | {p50:.3f} / {p99:.3f} | {1000 * batch / p50:.0f} | {net:.3f} | "
              f"{boxes:.1f} |")
        rows.append({"batch": batch, "chain_p50_ms": p50, "chain_p99_ms": p99,
                     "network_p50_ms": net, "boxes_per_frame": boxes})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "precision": "fp16" if a.fp16 else "fp32", "rows": rows}, f)


if __name__ == "__main__":
    main()
