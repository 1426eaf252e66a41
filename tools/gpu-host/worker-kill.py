#!/usr/bin/env python3
"""On a host of 2+ GPUs: the service's worker of one GPU killed mid-run (SIGKILL).

The service runs CAMERAS live 1080p test cameras (videotestsrc, 30 frames/s) through cudacascade
and cudanms, a worker process per GPU placing them over the GPUs. Once every camera streams, the
worker of GPU --kill is killed; the tool prints each camera's frames per second before the kill
and in the 5 s after it, the time until the killed worker's cameras have frames again, the
workers' pids and restarts from /health, and which GPU each worker's process ran on
(nvidia-smi). Then SIGTERM, and the exit status.

    worker-kill.py [--cameras 8] [--kill 1] [--detector D]

Run from the repository root with a build the pipelines/ scripts find (CUDANMS_BUILD).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from service_process import start_service


def get(url):
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except urllib.error.HTTPError as e:  # /health is 503 while a worker is down
        return e.read().decode()


def frames(base):
    health = json.loads(get(base + "/health"))
    return {name: c["frames"] for name, c in health["cameras"].items()}, health


def rates(base, seconds):
    before, _ = frames(base)
    time.sleep(seconds)
    after, _ = frames(base)
    return {name: (after[name] - before.get(name, 0)) / seconds for name in after}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cameras", type=int, default=8)
    parser.add_argument("--kill", type=int, default=1, help="the GPU whose worker is killed")
    parser.add_argument("--detector", default="")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="worker-kill-")
    config = "[service]\nmetrics-address = 127.0.0.1:0\n"
    if args.detector:
        config += "detector = %s\n" % args.detector
    for i in range(args.cameras):
        config += ("\n[camera.cam%d]\nsource = videotestsrc is-live=true pattern=ball ! "
                   "video/x-raw,width=1920,height=1080,framerate=30/1\n" % i)
    service, base = start_service(config, work)
    if not service:
        sys.exit("the service did not start: see %s/service.err" % work)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        _, health = frames(base)
        if health.get("status") == "ok" and len(health["cameras"]) == args.cameras:
            break
        time.sleep(0.5)
    else:
        service.kill()
        sys.exit("not every camera streamed in 90 s: see %s/service.err" % work)
    metrics = get(base + "/metrics")
    gpu_of = {m.group(1): int(float(m.group(2))) for m in re.finditer(
        r'^cudanms_camera_gpu\{camera="([^"]+)"\} (\S+)', metrics, re.M)}
    workers = health["workers"]
    print("workers:", {gpu: w["pid"] for gpu, w in workers.items()})
    print("placement:", gpu_of)
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_bus_id,used_memory",
                               "--format=csv,noheader"], capture_output=True, text=True).stdout
        print("nvidia-smi compute apps (pid, GPU bus, memory):\n" + apps.strip())
    except FileNotFoundError:
        print("no nvidia-smi here")
    before = rates(base, 5)
    victim = workers[str(args.kill)]["pid"]
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    mine = [c for c, g in gpu_of.items() if g == args.kill]
    at_kill, _ = frames(base)
    back, during = None, None
    while time.monotonic() - killed_at < 60 and (back is None or during is None):
        now, health = frames(base)
        elapsed = time.monotonic() - killed_at
        # The killed worker's cameras: streaming in a new worker, with new frames.
        if back is None and all(health["cameras"][c]["state"] == "streaming" and
                                now.get(c) != at_kill.get(c) for c in mine):
            back = elapsed
        if during is None and elapsed >= 5:
            during = {c: (now[c] - at_kill[c]) / elapsed for c in now if c not in mine}
        time.sleep(0.05)
    during = during or {}
    print("camera  gpu  frames/s before  frames/s in the 5 s after the kill")
    for c in sorted(before, key=lambda n: (gpu_of.get(n, -1), n)):
        print("%-7s %3d  %15.1f  %15s" % (c, gpu_of.get(c, -1), before[c],
                                           "%.1f" % during[c] if c in during else "(killed)"))
    print("the killed worker's cameras streaming again after %s" %
          ("%.2f s" % back if back is not None else "more than 60 s"))
    print("workers after:", {gpu: (w["pid"], w["restarts"], w["last_exit"])
                             for gpu, w in health["workers"].items()})
    service.send_signal(signal.SIGTERM)
    print("SIGTERM: exit status %d" % service.wait(timeout=60))


if __name__ == "__main__":
    sys.exit(main())
