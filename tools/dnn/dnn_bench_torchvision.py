#!/usr/bin/env python3
"""The peer of cudanms-dnn-bench: what a user writes in Python for the same chain with the same
TorchScript BlazeFace, all on the GPU: 1080p frames already on the GPU as uint8 RGB tensors (one
step ahead of cudanms's NV12), letterboxed into 128x128 with torch's antialiased bilinear resize,
normalised, the network, the anchors decoded with tensor ops, then torchvision.ops.batched_nms
over the whole batch (the frame index as the class, IoU 0.3; greedy, as torchvision has no
weighted NMS). p50/p99 of the whole chain per batch, torch.cuda.synchronize() at the end.

    dnn_bench_torchvision.py MODEL.pt [--frames RAW.bgr] [--batches 1,8,32,64] [--runs 100]
"""
import argparse

import torch
import torch.nn.functional as F
import torchvision

from peer_bench import H, W, frames_of, timed


def anchors():
    """BlazeFace front's 896 anchor centres (MediaPipe's SSD anchors: 16x16 x2, 8x8 x6)."""
    out = []
    for cells, per in ((16, 2), (8, 6)):
        for y in range(cells):
            for x in range(cells):
                out += [((x + 0.5) / cells, (y + 0.5) / cells)] * per
    return torch.tensor(out, dtype=torch.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--frames")
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--runs", type=int, default=100)
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    most = max(batches)
    dev = torch.device("cuda")
    frames = [f[:, :, ::-1].copy() for f in frames_of(a.frames, most)]  # RGB
    rgb = torch.stack([torch.from_numpy(f).permute(2, 0, 1) for f in frames]).to(dev)  # B,3,H,W uint8
    model = torch.jit.load(a.model, map_location=dev).eval()
    centres = anchors().to(dev)
    scale = 128 / max(W, H)
    nw, nh = round(W * scale), round(H * scale)
    px, py = (128 - nw) // 2, (128 - nh) // 2

    @torch.inference_mode()
    def chain(batch):
        x = F.interpolate(batch.float(), size=(nh, nw), mode="bilinear", antialias=True, align_corners=False)
        x = F.pad((x - 127.5) / 127.5, (px, 128 - nw - px, py, 128 - nh - py), value=-1.0)
        reg, logits = model(x)
        scores = torch.sigmoid(logits.clamp(-100, 100)[..., 0])
        cx = reg[..., 0] / 128 + centres[:, 0]
        cy = reg[..., 1] / 128 + centres[:, 1]
        w, h = reg[..., 2] / 128, reg[..., 3] / 128
        boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1) * 128
        boxes = (boxes - torch.tensor([px, py, px, py], device=dev)) / scale
        keep = scores > 0.5
        frame_of = torch.arange(batch.shape[0], device=dev)[:, None].expand_as(scores)
        b, s, f = boxes[keep], scores[keep], frame_of[keep]
        kept = torchvision.ops.batched_nms(b, s, f, 0.3)
        return b[kept], f[kept]

    print(f"| batch | chain p50 / p99 (ms) | frames/s | ms per frame |  (torch {torch.__version__}, "
          f"torchvision {torchvision.__version__}, {torch.cuda.get_device_name()})")
    print("|---:|---:|---:|---:|")
    for batch in batches:
        x = rgb[:batch]
        p50, p99 = timed(chain, x, a.runs)
        print(f"| {batch} | {p50:.3f} / {p99:.3f} | {1000 * batch / p50:.0f} | {p50 / batch:.3f} |")


if __name__ == "__main__":
    main()
