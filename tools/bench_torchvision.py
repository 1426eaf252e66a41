#!/usr/bin/env python3
"""Times torchvision's NMS on the data sets of a cudanms benchmark run, on a CUDA host.

    cudanms-tool bench --dump DIR --json DIR/bench.json
    tools/bench_torchvision.py DIR/bench.json --json DIR/torchvision.json

For each greedy IoU row of the bench (class-agnostic: torchvision.ops.nms; per class:
torchvision.ops.batched_nms) it times, over the same data sets in turn:
  torchvision      boxes and scores already on the GPU: the call and torch.cuda.synchronize()
  torchvision-h2d  from numpy arrays in host memory to kept indices in a numpy array, as a
                   caller with candidates in host memory sees it (--pinned: from pinned memory)
and, where the bench ran without OpenCV's C++ peer (or with --opencv), cv2.dnn.NMSBoxes from
Python as opencv-python. Every result is compared with cudanms's CPU kept indices (set and
order); differences are counted and reported, not fatal: the peers' arithmetic is their own.

Needs numpy; torch and torchvision with CUDA for the torchvision rows (exit status 3 without).
"""

import argparse
import datetime
import json
import math
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.exit("bench_torchvision.py: needs numpy (and torch, torchvision for the torchvision rows)")


def summarize(samples_us):
    """p50 and p99 by nearest rank, as cudanms-tool bench computes them."""
    s = sorted(samples_us)
    if not s:
        return {"runs": 0}

    def rank(q):
        return s[max(math.ceil(q * len(s)), 1) - 1]

    return {"runs": len(s), "p50_us": rank(0.5), "p99_us": rank(0.99), "min_us": s[0],
            "mean_us": sum(s) / len(s)}


def measure(call, sets, repeat, max_seconds):
    """Calls call(k) -> kept indices over the data sets k in turn: warm-up calls, then up to
    `repeat` timed ones within max_seconds (warm-up included, at least one timed call). call
    returns (elapsed seconds, kept numpy array). Returns the latency and every call's results."""
    start = time.perf_counter()
    warmup = max(sets, 3)
    samples, results = [], []
    call_index = timed = 0
    while timed < repeat:
        elapsed = time.perf_counter() - start
        warming = call_index < warmup and (call_index == 0 or elapsed < max_seconds / 4)
        if not warming and timed > 0 and elapsed >= max_seconds:
            break
        k = call_index % sets
        seconds, kept = call(k)
        results.append((k, kept))
        call_index += 1
        if not warming:
            timed += 1
            samples.append(seconds * 1e6)
    return summarize(samples), results


def load_csv(path):
    """x1,y1,x2,y2,score[,class] lines, as cudanms-tool writes them (shortest float strings,
    which read back to the same float32)."""
    rows = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2, comments="#")
    if rows.size == 0:
        rows = np.zeros((0, 6))
    boxes = np.ascontiguousarray(rows[:, 0:4], dtype=np.float32)
    scores = np.ascontiguousarray(rows[:, 4], dtype=np.float32)
    classes = (np.ascontiguousarray(rows[:, 5], dtype=np.int64) if rows.shape[1] > 5
               else np.zeros(len(rows), dtype=np.int64))
    return boxes, scores, classes


def load_groups(bench, dump_dir):
    """The bench's greedy IoU data sets, grouped by row (config, n), each with its sets loaded."""
    groups = {}
    for entry in bench.get("datasets", []):
        # torchvision's batched_nms has no class groups: greedy-groups has no peer.
        if entry["method"] != "greedy" or entry["overlap"] != "iou" or \
                entry["config"] == "greedy-groups":
            continue  # torchvision and OpenCV have no matrix NMS and no other overlap
        key = (entry["config"], entry["n"])
        group = groups.setdefault(key, {"entry": entry, "sets": []})
        boxes, scores, classes = load_csv(os.path.join(dump_dir, entry["file"]))
        kept = np.loadtxt(os.path.join(dump_dir, entry["kept_file"]), dtype=np.int64, ndmin=1)
        group["sets"].append({"boxes": boxes, "scores": scores, "classes": classes,
                              "reference": kept})
    return list(groups.values())


def compare(results, sets):
    """How many results keep another set of candidates than cudanms, and how many only another
    order."""
    other_set = other_order = 0
    for k, kept in results:
        reference = sets[k]["reference"]
        kept = np.asarray(kept, dtype=np.int64).ravel()
        if not np.array_equal(np.sort(kept), np.sort(reference)):
            other_set += 1
        elif not np.array_equal(kept, reference):
            other_order += 1
    return {"checked": len(results), "differing": other_set, "differing_order": other_order}


def result_row(group, backend, call, latency, agreement):
    e = group["entry"]
    row = {key: e[key] for key in ("config", "data", "n", "classes", "method", "overlap",
                                   "threshold", "class_agnostic")}
    row.update({"backend": backend, "call": call, "host": latency,
                "kept": int(len(group["sets"][0]["reference"]))})
    row.update(agreement)
    return row


def opencv_rows(groups, args):
    """cv2.dnn.NMSBoxes from Python: boxes as an (N, 4) float64 x, y, w, h array."""
    import cv2

    rows = []
    for group in groups:
        e = group["entry"]
        inputs = []
        for s in group["sets"]:
            b = s["boxes"].astype(np.float64)
            xywh = np.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], axis=1)
            inputs.append((xywh, s["scores"], s["classes"].astype(np.int32)))
        threshold = float(e["threshold"])
        batched = hasattr(cv2.dnn, "NMSBoxesBatched")

        def run(k):
            xywh, scores, classes = inputs[k]
            begin = time.perf_counter()
            if e["class_agnostic"]:
                kept = cv2.dnn.NMSBoxes(xywh, scores, 0.0, threshold)
            elif batched:
                kept = cv2.dnn.NMSBoxesBatched(xywh, scores, classes, 0.0, threshold)
            else:
                kept = []
                for c in np.unique(classes):
                    members = np.flatnonzero(classes == c)
                    local = np.asarray(cv2.dnn.NMSBoxes(xywh[members], scores[members], 0.0,
                                                        threshold), dtype=np.int64).ravel()
                    kept.extend(members[local])
                kept = sorted(kept, key=lambda i: (-scores[i], i))
            elapsed = time.perf_counter() - begin
            return elapsed, np.asarray(kept, dtype=np.int64).ravel()

        latency, results = measure(run, len(inputs), args.repeat, args.max_seconds)
        call = ("cv2.dnn.NMSBoxes" if e["class_agnostic"] else
                "cv2.dnn.NMSBoxesBatched" if batched else "cv2.dnn.NMSBoxes per class")
        rows.append(result_row(group, "opencv-python", call, latency,
                               compare(results, group["sets"])))
        print_row(rows[-1])
    return rows


def torchvision_rows(groups, args, torch, torchvision):
    device = torch.device("cuda")
    rows = []
    for group in groups:
        e = group["entry"]
        threshold = float(e["threshold"])
        agnostic = e["class_agnostic"]
        call = "torchvision.ops.nms" if agnostic else "torchvision.ops.batched_nms"

        def nms(boxes, scores, classes):
            if agnostic:
                return torchvision.ops.nms(boxes, scores, threshold)
            return torchvision.ops.batched_nms(boxes, scores, classes, threshold)

        on_gpu = [(torch.from_numpy(s["boxes"]).to(device), torch.from_numpy(s["scores"]).to(device),
                   torch.from_numpy(s["classes"]).to(device)) for s in group["sets"]]
        torch.cuda.synchronize()

        def resident(k):
            boxes, scores, classes = on_gpu[k]
            begin = time.perf_counter()
            keep = nms(boxes, scores, classes)
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - begin
            return elapsed, keep.cpu().numpy()

        if args.pinned:
            host = [tuple(torch.from_numpy(a).pin_memory() for a in
                          (s["boxes"], s["scores"], s["classes"])) for s in group["sets"]]
        else:
            host = [(s["boxes"], s["scores"], s["classes"]) for s in group["sets"]]

        def round_trip(k):
            boxes, scores, classes = host[k]
            begin = time.perf_counter()
            if args.pinned:
                keep = nms(boxes.to(device, non_blocking=True),
                           scores.to(device, non_blocking=True),
                           classes.to(device, non_blocking=True))
            else:
                keep = nms(torch.from_numpy(boxes).to(device), torch.from_numpy(scores).to(device),
                           torch.from_numpy(classes).to(device))
            kept = keep.cpu().numpy()
            elapsed = time.perf_counter() - begin
            return elapsed, kept

        for backend, run in (("torchvision", resident),
                             ("torchvision-h2d" + ("-pinned" if args.pinned else ""), round_trip)):
            latency, results = measure(run, len(group["sets"]), args.repeat, args.max_seconds)
            rows.append(result_row(group, backend, call, latency,
                                   compare(results, group["sets"])))
            print_row(rows[-1])
    return rows


def print_row(row):
    agrees = "yes" if row["differing"] == 0 else f'{row["differing"]}/{row["checked"]} differ'
    if row["differing"] == 0 and row["differing_order"]:
        agrees = f'order {row["differing_order"]}/{row["checked"]}'
    host = row["host"]
    print(f'{row["n"]:>7}  {row["config"]:<18} {row["backend"]:<22} {host["p50_us"]:>9.1f} '
          f'{host["p99_us"]:>9.1f} {row["kept"]:>6}  {agrees}', flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench_json", help="the JSON of cudanms-tool bench --dump DIR --json FILE")
    parser.add_argument("--dump-dir", help="where the data sets are (default: the JSON's dump_dir)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per cell, at most (default: the bench's)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="time per cell, warm-up included (default: the bench's)")
    parser.add_argument("--pinned", action="store_true",
                        help="host->GPU->host from pinned host memory")
    parser.add_argument("--opencv", action="store_true",
                        help="time cv2.dnn.NMSBoxes even when the bench timed OpenCV's C++")
    parser.add_argument("--no-torch", action="store_true",
                        help="only the OpenCV rows (for a host without CUDA)")
    args = parser.parse_args(argv)

    with open(args.bench_json) as f:
        bench = json.load(f)
    if "datasets" not in bench:
        sys.exit(f"{args.bench_json}: no datasets: run cudanms-tool bench with --dump DIR")
    args.repeat = args.repeat or bench["repeat"]
    args.max_seconds = args.max_seconds if args.max_seconds is not None else bench["max_seconds"]
    groups = load_groups(bench, args.dump_dir or bench["dump_dir"])

    out = {"tool": "bench_torchvision.py",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "bench_seed": bench["seed"], "bench_version": bench.get("version"),
           "repeat": args.repeat, "max_seconds": args.max_seconds, "pinned": args.pinned,
           "gpu": None, "torch": None, "torchvision": None, "opencv_python": None, "results": []}
    print(f'{"N":>7}  {"config":<18} {"backend":<22} {"p50 us":>9} {"p99 us":>9} {"kept":>6}  '
          "agrees")

    missing = None
    if not args.no_torch:
        try:
            import torch
            import torchvision
        except ImportError as e:
            missing = f"torch and torchvision are needed for the torchvision rows ({e})"
        else:
            if not torch.cuda.is_available():
                missing = "torch sees no CUDA device"
            else:
                out.update(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                           torchvision=torchvision.__version__)
                out["results"] += torchvision_rows(groups, args, torch, torchvision)

    if args.opencv or not bench.get("opencv"):
        try:
            import cv2
        except ImportError:
            print("opencv-python is not installed: no OpenCV rows from Python", file=sys.stderr)
        else:
            out["opencv_python"] = cv2.__version__
            out["results"] += opencv_rows(groups, args)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if missing:
        print(f"bench_torchvision.py: {missing}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
