#!/usr/bin/env python3
"""One camera reconnected hundreds of times: what the service keeps per connection.

pipelines/rtsp-server on 127.0.0.1 serves CLIP from its start to each client and ends the stream
there (RTCP BYE); the service's one camera (SOURCE, URL replaced by the server's) plays it to its
end, reconnects at once, and so on. At every 25th reconnection the service's resident memory,
threads, descriptors and the resident memory of its /dev/nvidia* mappings (the CUDA driver's) are
read from /proc. Prints them, and the growth per reconnection between the 50th and the last.

    reconnect-rss.py CLIP [--reconnects 300] [--source S] [--detector D] [--json FILE]

Run from the repository root with a build the pipelines/ scripts find (CUDANMS_BUILD).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

from service_process import ROOT, start_service


def footprint(pid):
    status = open("/proc/%d/status" % pid).read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    fds = len(os.listdir("/proc/%d/fd" % pid))
    driver, inside = 0, False
    for line in open("/proc/%d/smaps" % pid):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = "/dev/nvidia" in line
        elif inside and line.startswith("Rss:"):
            driver += int(line.split()[1])
    return {"rss_kib": rss, "threads": threads, "fds": fds, "driver_kib": driver}


def reconnects(metrics_url):
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    found = re.search(r'^cudanms_camera_reconnects_total\{camera="short"\} (\S+)', text, re.M)
    return int(float(found.group(1))) if found else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("clip")
    parser.add_argument("--reconnects", type=int, default=300)
    parser.add_argument("--source", default="")
    parser.add_argument("--detector", default="")
    parser.add_argument("--minutes", type=float, default=9, help="give up after this long")
    parser.add_argument("--json")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="reconnect-rss-")
    server = subprocess.Popen(
        [os.path.join(ROOT, "pipelines", "rtsp-server"), "--port", "0", "--address", "127.0.0.1",
         args.clip], stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.err"), "w"),
        text=True)
    url = server.stdout.readline().strip()
    if not url.startswith("rtsp://"):
        sys.exit("the server did not start: see %s/server.err" % work)
    config = ("[service]\nmetrics-address = 127.0.0.1:0\nreconnect-initial = 0.05\n"
              "reconnect-max = 0.05\n")
    if args.detector:
        config += "detector = %s\n" % args.detector
    config += "\n[camera.short]\n"
    config += ("source = %s\n" % args.source.replace("URL", url) if args.source
               else "url = %s\n" % url)
    service, base = start_service(config, work)
    if not service:
        server.kill()
        sys.exit("the service did not start: see %s/service.err" % work)
    metrics_url = base + "/metrics"
    pid = service.pid  # pipelines/service execs the binary
    samples, next_mark = [], 25
    end = time.monotonic() + args.minutes * 60
    while time.monotonic() < end and service.poll() is None:
        n = reconnects(metrics_url)
        if n >= next_mark:
            sample = dict(footprint(pid), reconnects=n)
            samples.append(sample)
            print("reconnects %(reconnects)4d: RSS %(rss_kib)7d KiB, driver %(driver_kib)7d KiB, "
                  "threads %(threads)3d, descriptors %(fds)3d" % sample, flush=True)
            next_mark = n - n % 25 + 25
            if n >= args.reconnects:
                break
        time.sleep(0.25)
    service.terminate()
    service.wait(timeout=30)
    server.terminate()
    server.wait(timeout=10)
    at_50 = next((s for s in samples if s["reconnects"] >= 50), None)
    last = samples[-1] if samples else None
    if not at_50 or last is at_50:
        sys.exit("too few reconnections (%d): see %s/service.err" %
                 (last["reconnects"] if last else 0, work))
    n = last["reconnects"] - at_50["reconnects"]
    figures = {"samples": samples, "reconnects": last["reconnects"],
               "rss_kib_per_reconnect": (last["rss_kib"] - at_50["rss_kib"]) / n,
               "driver_kib_per_reconnect": (last["driver_kib"] - at_50["driver_kib"]) / n}
    print("from the %dth to the %dth reconnection: RSS %+d KiB (%+.1f a reconnection), driver "
          "%+d KiB, threads %+d, descriptors %+d" %
          (at_50["reconnects"], last["reconnects"], last["rss_kib"] - at_50["rss_kib"],
           figures["rss_kib_per_reconnect"], last["driver_kib"] - at_50["driver_kib"],
           last["threads"] - at_50["threads"], last["fds"] - at_50["fds"]))
    if args.json:
        json.dump(figures, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
