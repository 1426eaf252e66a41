#!/usr/bin/env python3
"""tools/bench_torchvision.py and tools/bench_plot.py on a small run of the real bench
(CUDANMS_TOOL), with fake_peers/ standing in for torch, torchvision and cv2, so that every path of
the scripts runs without a GPU. Exit 77 (skipped) without numpy."""

import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")


def run(args, env=None):
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    return done.returncode, done.stdout, done.stderr


def main():
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("numpy is not installed: skipped")
        return SKIP
    tool = os.environ["CUDANMS_TOOL"]
    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)
            print("FAILED:", what)

    with tempfile.TemporaryDirectory() as tmp:
        bench_json = os.path.join(tmp, "bench.json")
        code, out, err = run([tool, "bench", "--sizes", "300,1000", "--class-sizes", "400,800",
                              "--classes", "4", "--face-sizes", "300", "--variant-sizes", "", "--group-sizes", "", "--diou-sizes", "300", "--batches", "", "--streams", "", "--repeat", "3", "--sets",
                              "2", "--dump", os.path.join(tmp, "data"), "--json", bench_json])
        check(code == 0, f"bench exits 0: {code} {err}")
        bench = json.load(open(bench_json))
        for key in ("version", "date", "seed", "gpu", "cpu", "opencv", "results", "datasets",
                    "dump_dir"):
            check(key in bench, f"bench JSON has {key}")
        for row in bench["results"]:
            check(row["differing"] == 0 or row["backend"] == "opencv", f"row agrees: {row}")
            check(row["host"]["runs"] >= 1 and row["host"]["p50_us"] > 0, f"row timed: {row}")
        check(len(bench["datasets"]) == 2 * 6, "two data sets for each of the six rows")

        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake_peers"))
        tv_json = os.path.join(tmp, "torchvision.json")
        code, out, err = run([sys.executable, os.path.join(TOOLS, "bench_torchvision.py"),
                              bench_json, "--json", tv_json, "--opencv"], env)
        check(code == 0, f"bench_torchvision.py exits 0: {code} {err}")
        tv = json.load(open(tv_json))
        check(tv["gpu"] == "Fake GPU" and tv["opencv_python"] == "fake", "peers' versions")
        rows = {(r["config"], r["n"], r["backend"]): r for r in tv["results"]}
        check(not any(config == "greedy-diou" for config, _, _ in rows),
              "no torchvision row for DIoU: its NMS is IoU only")
        for config, n in (("greedy", 300), ("greedy", 1000), ("greedy-4cls", 400),
                          ("greedy-4cls", 800)):
            for backend in ("torchvision", "torchvision-h2d", "opencv-python"):
                row = rows.get((config, n, backend))
                check(row is not None, f"a {backend} row for {config} {n}")
                if row:
                    check(row["differing"] == 0 and row["differing_order"] == 0,
                          f"{backend} {config} {n} agrees: {row}")
                    check(row["checked"] >= 2, f"{backend} {config} {n} checked every set")
        check(not any(r["config"].startswith("matrix") for r in tv["results"]),
              "no torchvision matrix rows")

        # A kept file that is wrong must show as a disagreement.
        entry = bench["datasets"][0]
        kept_path = os.path.join(bench["dump_dir"], entry["kept_file"])
        kept = open(kept_path).read().split()
        open(kept_path, "w").write("\n".join(kept[1:]) + "\n")
        code, out, err = run([sys.executable, os.path.join(TOOLS, "bench_torchvision.py"),
                              bench_json, "--json", tv_json, "--repeat", "2"], env)
        tv_bad = json.load(open(tv_json))
        bad = [r for r in tv_bad["results"]
               if (r["config"], r["n"]) == (entry["config"], entry["n"])]
        check(bad and all(r["differing"] > 0 for r in bad), f"a wrong reference is caught: {bad}")
        check("differ" in out, "and printed")

        png = os.path.join(tmp, "docs", "benchmark.png")
        md = os.path.join(tmp, "docs", "benchmark.md")
        code, out, err = run([sys.executable, os.path.join(TOOLS, "bench_plot.py"), bench_json,
                              tv_json, "--png", png, "--md", md])
        text = open(md).read() if os.path.exists(md) else ""
        check(text and out == text, "the table is written and printed")
        # The bench's own GPU where it found one (a GPU host), else the peers' fake one.
        gpu = json.load(open(bench_json)).get("gpu") or "Fake GPU"
        gpu = gpu[gpu.find("(") + 1:gpu.rfind(")")] if "(" in gpu else gpu
        for part in (gpu, "torchvision, GPU-resident", "torchvision, host→GPU→host",
                     "cudanms CPU", "OpenCV NMSBoxes", "| 1,000 |", "4 classes", "matrix NMS",
                     "DIoU-NMS", "Targets"):
            check(part in text, f"the table has {part!r}")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            check(code == 3, "without matplotlib, exit 3")
        else:
            check(code == 0, f"bench_plot.py exits 0: {code} {err}")
            check(open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "a PNG is drawn")

        # Streams rows through K shared contexts get a column each, after the one-context column.
        streams_json = os.path.join(tmp, "streams.json")
        rows = [{"config": "streams-16", "n": 300, "backend": backend, "differing": 0,
                 "host": {"p50_us": p50, "p99_us": 2 * p50, "runs": 9},
                 "frames_per_second": 1e6 / p50}
                for backend, p50 in (("cuda-shared-4", 60.0), ("cpu", 35.0), ("cuda", 52.0),
                                     ("cuda-shared", 178.0), ("cuda-shared-12", 55.0))]
        json.dump({"version": "v", "date": "2026-11-24", "seed": 1, "gpu": "", "cpu": "c",
                   "results": rows}, open(streams_json, "w"))
        code, out, err = run([sys.executable, os.path.join(TOOLS, "bench_plot.py"), streams_json,
                              "--png", png, "--md", md])
        header = next((line for line in out.splitlines() if line.startswith("| N |")), "")
        check(header == "| N | cudanms CUDA | cudanms CUDA, one context for all streams | "
              "cudanms CUDA, 4 contexts for all streams | cudanms CUDA, 12 contexts for all "
              "streams | cudanms CPU |", f"the streams columns in order: {header!r} {err}")
        check("| 300 | 52.0 µs (19,231/s) | 178 µs (5,618/s) | 60.0 µs (16,667/s)" in out,
              f"the streams cells: {out}")

    print("ok" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
