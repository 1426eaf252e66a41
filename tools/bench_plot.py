#!/usr/bin/env python3
"""Merges a cudanms benchmark run with its torchvision run into docs/benchmark.md (a markdown
table) and docs/benchmark.png (p50 latency against N, log-log).

    tools/bench_plot.py DIR/bench.json [DIR/torchvision.json] [--png FILE] [--md FILE]

Needs matplotlib for the PNG only; the markdown is written without it.
"""

import argparse
import json
import os
import re
import sys

# The columns of the tables and lines of the plot: (key, label, backend in the JSON, latency).
SERIES = [
    ("cuda", "cudanms CUDA", "cuda", "host"),
    ("cuda-gpu", "cudanms CUDA, GPU only", "cuda", "device"),
    ("cuda-shared", "cudanms CUDA, one context for all streams", "cuda-shared", "host"),
    ("cpu", "cudanms CPU", "cpu", "host"),
    ("opencv", "OpenCV NMSBoxes", "opencv", "host"),
    ("opencv-python", "OpenCV NMSBoxes (Python)", "opencv-python", "host"),
    ("torchvision", "torchvision, GPU-resident", "torchvision", "host"),
    ("torchvision-h2d", "torchvision, host→GPU→host", "torchvision-h2d", "host"),
    ("torchvision-h2d-pinned", "torchvision, pinned host→GPU→host", "torchvision-h2d-pinned",
     "host"),
]
# The streams rows through K > 1 shared contexts ("cuda-shared-4") follow "cuda-shared".
SHARED_CONTEXTS = re.compile(r"cuda-shared-(\d+)$")


def label(key):
    m = SHARED_CONTEXTS.match(key)
    if m:
        return f"cudanms CUDA, {m.group(1)} contexts for all streams"
    return next(label for k, label, _, _ in SERIES if k == key)


def series_keys(present):
    """The keys in `present` in the order of SERIES, each cuda-shared-K after cuda-shared."""
    keys = []
    for key, _, _, _ in SERIES:
        if key in present:
            keys.append(key)
        if key == "cuda-shared":
            keys += sorted((k for k in present if SHARED_CONTEXTS.match(k)),
                           key=lambda k: int(SHARED_CONTEXTS.match(k).group(1)))
    return keys


STYLE = {
    "cuda": dict(color="tab:green", marker="o", linestyle="-", linewidth=2.2),
    "cuda-gpu": dict(color="tab:green", marker="o", linestyle="--", fillstyle="none"),
    "cuda-shared": dict(color="tab:olive", marker="o", linestyle="-"),
    "cpu": dict(color="tab:blue", marker="s", linestyle="-"),
    "opencv": dict(color="tab:red", marker="^", linestyle="-"),
    "opencv-python": dict(color="tab:red", marker="^", linestyle=":"),
    "torchvision": dict(color="tab:orange", marker="D", linestyle="--"),
    "torchvision-h2d": dict(color="tab:orange", marker="D", linestyle="-"),
    "torchvision-h2d-pinned": dict(color="tab:brown", marker="D", linestyle="-"),
}


def load(path):
    with open(path) as f:
        return json.load(f)


def gpu_name(bench, torchvision):
    """"NVIDIA H100 80GB HBM3" from "cuda:0 (NVIDIA H100 80GB HBM3)", or torch's name."""
    if bench.get("gpu"):
        m = re.search(r"\((.*)\)", bench["gpu"])
        return m.group(1) if m else bench["gpu"]
    if torchvision and torchvision.get("gpu"):
        return torchvision["gpu"]
    return "no GPU"


def collect(rows):
    """{config: {n: {series key: (p50, p99, agrees, frames/s or None)}}} from the results of
    both runs."""
    table = {}
    for row in rows:
        if "error" in row or row.get("data") == "file":
            continue
        series = [(key, latency) for key, _, backend, latency in SERIES if row["backend"] == backend]
        if SHARED_CONTEXTS.match(row["backend"]):
            series.append((row["backend"], "host"))
        for key, latency in series:
            if latency not in row:
                continue
            figures = row[latency]
            if figures["p50_us"] <= 0:
                continue  # no GPU time: the frames were redone on the CPU (adversarial input)
            agrees = row.get("differing", 0) == 0 and row.get("differing_order", 0) == 0
            table.setdefault(row["config"], {}).setdefault(row["n"], {})[key] = (
                figures["p50_us"], figures["p99_us"], agrees, row.get("frames_per_second"))
    return table


def fmt(us):
    if us < 1000:
        return f"{us:.1f} µs" if us < 100 else f"{us:.0f} µs"
    if us < 1e6:
        return f"{us / 1000:.2f} ms" if us < 1e4 else f"{us / 1000:.1f} ms"
    return f"{us / 1e6:.2f} s"


def markdown_table(by_n, keys):
    lines = ["| N | " + " | ".join(label(k) for k in keys) + " |",
             "|---:|" + "---:|" * len(keys)]
    for n in sorted(by_n):
        cells = []
        for k in keys:
            if k not in by_n[n]:
                cells.append("—")
                continue
            p50, _, agrees, fps = by_n[n][k]
            cells.append(fmt(p50) + (f" ({fps:,.0f}/s)" if fps else "") + ("" if agrees else " ≠"))
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    return lines


def targets(bench, table):
    """The issue's targets as the bench judged them; the CPU-vs-OpenCV one from OpenCV via
    Python when the bench had no OpenCV of its own."""
    lines = []
    for row in bench["results"]:
        if "target" not in row:
            continue
        value = row["host"]["p50_us"]
        met = row.get("target_met")
        note = ""
        if met is None and row["backend"] == "cpu":
            peer = table.get(row["config"], {}).get(row["n"], {}).get("opencv-python")
            if peer:
                met = value * 5 <= peer[0]
                note = f" (OpenCV via Python: {fmt(peer[0])})"
        verdict = "n/a" if met is None else "met" if met else "**missed**"
        lines.append(f"- {row['config']} N={row['n']:,} {row['backend']}: {fmt(value)} p50, "
                     f"target {row['target']}{note}: {verdict}")
    return lines


def write_markdown(bench, torchvision, table, path):
    gpu = gpu_name(bench, torchvision)
    keys_present = {k for rows in table.values() for by_key in rows.values() for k in by_key}
    keys = series_keys(keys_present)
    lines = [f"Benchmark: {gpu}, {bench['cpu']}, {bench['date'][:10]}; cudanms {bench['version']}"
             f", seed {bench['seed']}",
             ""]
    if torchvision and torchvision.get("torch"):
        lines[0] += f"; torch {torchvision['torch']}, torchvision {torchvision['torchvision']}"
    if bench.get("opencv"):
        lines[0] += f"; OpenCV {bench['opencv']} (C++)"
    elif torchvision and torchvision.get("opencv_python"):
        lines[0] += f"; opencv-python {torchvision['opencv_python']}"
    lines.append("p50 host-visible latency, candidates in host memory to kept indices in host "
                 "memory, except GPU-only and GPU-resident; ≠: kept set or order differed from "
                 "cudanms's CPU backend on some run.")
    titles = {"greedy": "Greedy NMS, IoU 0.5, class-agnostic",
              "greedy-diou": "Greedy NMS, DIoU 0.5 (YOLO's DIoU-NMS), class-agnostic",
              "soft-gaussian": "Soft-NMS, gaussian sigma 0.5, floor 0.25, class-agnostic",
              "weighted": "Weighted NMS (MediaPipe), IoU 0.5, class-agnostic",
              "greedy-groups": "Greedy NMS per class, classes 1,2,3,5,7 as one group",
              "matrix-faces": "The paper's matrix NMS, IoS 0.3, face windows"}
    def order(config):  # greedy first, matrix last, batches then streams by their count
        count = int(config.split("-")[1]) if config.startswith(("batch-", "streams-")) else 0
        return (config != "greedy", config.startswith("matrix"), config.startswith("batch-"),
                config.startswith("streams-"), count, config)

    for config in sorted(table, key=order):
        present = {k for by_key in table[config].values() for k in by_key}
        title = titles.get(config, config)
        if config.startswith("greedy-") and config.endswith("cls"):
            title = f"Greedy NMS, IoU 0.5, per class, {config[7:-3]} classes"
        if config.startswith("batch-"):
            title = (f"Batches: {config[6:]} frame(s) of N candidates per Context::run call, "
                     "greedy IoU 0.5, class-agnostic, p50 of the whole call")
        if config.startswith("streams-"):
            title = (f"Streams: {config[8:]} threads, each running frames of N candidates in "
                     "turn, greedy IoU 0.5, class-agnostic; p50 of a frame (frames/s in all)")
        if "torchvision" in present:
            title += (" (torchvision.ops.nms)" if config == "greedy"
                      else " (torchvision.ops.batched_nms)")
        lines += ["", f"**{title}**", ""]
        lines += markdown_table(table[config], [k for k in keys if k in present])
    lines += ["", "Targets (set for an NVIDIA H100):", ""] + targets(bench, table)
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


def write_png(bench, torchvision, table, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [c for c in sorted(table, key=lambda c: (c != "greedy", c))
              if c.startswith("greedy") and len(table[c]) > 1]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5), squeeze=False)
    labels = {key: label for key, label, _, _ in SERIES}
    for ax, config in zip(axes[0], panels):
        by_n = table[config]
        for key, _, _, _ in SERIES:
            points = [(n, by_n[n][key][0]) for n in sorted(by_n) if key in by_n[n]]
            if points:
                ax.plot(*zip(*points), label=labels[key], **STYLE[key])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("candidates N")
        ax.set_ylabel("p50 latency per call (µs)")
        ax.set_title("class-agnostic greedy, IoU 0.5" if config == "greedy"
                     else f"per-class greedy, IoU 0.5, {config[7:-3]} classes", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"NMS latency on {gpu_name(bench, torchvision)}, {bench['date'][:10]} "
                 f"(cudanms {bench['version']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench_json")
    parser.add_argument("torchvision_json", nargs="?")
    parser.add_argument("--png", default="docs/benchmark.png")
    parser.add_argument("--md", default="docs/benchmark.md")
    args = parser.parse_args(argv)

    bench = load(args.bench_json)
    torchvision = None
    if args.torchvision_json and os.path.exists(args.torchvision_json):
        torchvision = load(args.torchvision_json)
    table = collect(bench["results"] + (torchvision["results"] if torchvision else []))
    for path in (args.png, args.md):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    print(write_markdown(bench, torchvision, table, args.md), end="")
    try:
        drawn = write_png(bench, torchvision, table, args.png)
    except ImportError:
        print(f"bench_plot.py: matplotlib is not installed: no {args.png}", file=sys.stderr)
        return 3
    if not drawn:
        print(f"bench_plot.py: fewer than two sizes: no {args.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
