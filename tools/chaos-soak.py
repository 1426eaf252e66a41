#!/usr/bin/env python3
"""Chaos soak of the camera service (pipelines/service): loopback cameras that fail at random for
as long as you let it run, and the figures a site cares about at the end. Not in CI.

    tools/chaos-soak.py [--minutes 15] [--cameras 4] [--json FILE]

Cameras are pipelines/rtsp-server on 127.0.0.1, each sending an H.264 clip in a loop (--loop:
no end of file, no transcoding): by default vtest.avi's first 300 frames at 384x288, 10 frames/s,
encoded once with gst-launch-1.0 and x264enc; --file FILE --loop sends your own H.264 clip.
Faults (--faults random, the default): every 30-60 s one camera, at random, has its server
killed (SIGKILL) and restarted on the same port 5-20 s later, or stopped (SIGSTOP) and let go on
(SIGCONT) 5-20 s later. --faults burst: every --burst-every seconds, --burst cameras killed at
once for --down seconds (the others' frame rate is compared before and during). --faults gpu:
the same, the cameras killed being all those the service placed on one GPU (each GPU in turn,
from cudanms_camera_gpu): the other GPUs' cameras should keep their rate (goal: within 5%).
--gpus sets the service's gpus key.

Figures: crashes of the service (goal 0); its RSS after the first minute, at the end and the
slope (goal flat), of all its processes together and of each (the supervisor and each GPU's
worker, where its cameras live); reconnects; the recovery time after each server returned,
p50/p99, and each against the wait its back-off still had (goal: recovery <= that wait + 2 s);
frames delivered (cudanms_camera_frames_total) against frames the servers sent (their
--count-file; goal >= 99%).
The service runs with the defaults of a real site: reconnect 1 s doubling to 30 s, watchdog 10 s.
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VTEST = "/usr/share/doc/opencv-doc/examples/data/vtest.avi"
SAMPLE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')


class Camera:
    """A loopback camera: pipelines/rtsp-server, killed, stopped and restarted on its port."""

    def __init__(self, name, work, server_args):
        self.name, self.work, self.server_args = name, work, server_args
        self.port, self.process, self.runs = 0, None, 0

    def start(self):
        count = os.path.join(self.work, "served-%s-%d" % (self.name, self.runs))
        self.runs += 1
        self.process = subprocess.Popen(
            [os.path.join(ROOT, "pipelines", "rtsp-server"), "--port", str(self.port),
             "--address", "127.0.0.1", "--count-file", count] + self.server_args,
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.work, self.name + ".err"), "a"),
            text=True)
        url = self.process.stdout.readline().strip()
        if not url.startswith("rtsp://"):
            sys.exit("%s's server did not start: see %s.err" % (self.name, self.name))
        self.port = int(url.rsplit(":", 1)[1].split("/")[0])
        self.url = url

    def kill(self):
        self.process.send_signal(signal.SIGCONT)
        self.process.kill()
        self.process.wait()

    def stop(self):
        self.process.send_signal(signal.SIGSTOP)

    def resume(self):
        self.process.send_signal(signal.SIGCONT)

    def served(self):
        total = 0
        for run in range(self.runs):
            path = os.path.join(self.work, "served-%s-%d" % (self.name, run))
            if os.path.exists(path):
                text = open(path).read().strip()
                total += int(text) if text else 0
        return total


class Service:
    """pipelines/service --config, its log timestamped as it comes, its /metrics."""

    def __init__(self, config, work):
        self.lines = []  # (monotonic time, line)
        self.log = open(os.path.join(work, "service.log"), "w")
        self.process = subprocess.Popen(
            [os.path.join(ROOT, "pipelines", "service"), "--config", config],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 60
        while not self.base():
            if time.monotonic() > deadline or self.process.poll() is not None:
                sys.exit("the service did not start: see service.log")
            time.sleep(0.1)

    def _read(self):
        for line in self.process.stderr:
            now = time.monotonic()
            self.lines.append((now, line.rstrip("\n")))
            self.log.write("%.3f %s" % (now, line))
            self.log.flush()

    def base(self):
        for _, line in list(self.lines):
            found = re.search(r"metrics at (http://\S+)/metrics", line)
            if found:
                return found.group(1)
        return None

    def metrics(self):
        """{(name, camera): value}"""
        text = urllib.request.urlopen(self.base() + "/metrics", timeout=10).read().decode()
        out = {}
        for line in text.splitlines():
            found = SAMPLE.match(line)
            if not found or line.startswith("#"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(2) or ""))
            camera = labels.pop("camera", "")
            rest = ",".join("%s=%s" % item for item in sorted(labels.items()))
            out[(found.group(1), camera, rest)] = float(found.group(3))
        return out

    def frames(self, camera, metrics=None):
        metrics = metrics or self.metrics()
        return metrics.get(("cudanms_camera_frames_total", camera, ""), 0)

    def rss_by_process(self):
        """{"service": KiB} for one process; with workers, {"supervisor": KiB, "worker gpu N":
        KiB, ...}: the service's memory is where its cameras live, in its workers."""
        def rss(pid):
            try:
                for line in open("/proc/%d/status" % pid):
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
            except OSError:
                pass
            return 0
        out = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                ppid = int(open("/proc/%s/stat" % entry).read().rsplit(")", 1)[1].split()[1])
                argv = open("/proc/%s/cmdline" % entry).read().split("\0")
            except (OSError, IndexError, ValueError):
                continue
            if ppid == self.process.pid and "--worker" in argv:
                out["worker gpu " + argv[argv.index("--worker") + 1]] = rss(int(entry))
        out["supervisor" if out else "service"] = rss(self.process.pid)
        return out

    def rss_kib(self):
        """The service's RSS: its process's, and its workers' with them."""
        return sum(self.rss_by_process().values())

    def wait_left(self, camera, at):
        """How long the camera's back-off still had to run at `at` (0 when an attempt is on)."""
        pattern = re.compile(r"camera %s: .*next in ([0-9.]+) s\)" % re.escape(camera))
        left = 0.0
        for when, line in list(self.lines):
            if when > at:
                break
            found = pattern.search(line)
            if found:
                left = max(0.0, when + float(found.group(1)) - at)
            elif "camera %s: reconnecting -> " % camera in line or \
                    "camera %s: starting -> streaming" % camera in line:
                left = 0.0
        return left


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(p * len(values) + 0.5)) - 1))]


def slope_per_minute(samples):
    """Least-squares slope of (minutes, KiB) samples, KiB a minute; 0 for fewer than two."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / n
    mean_k = sum(k for _, k in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    return sum((t - mean_t) * (k - mean_k) for t, k in samples) / var if var else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--cameras", type=int, default=4)
    parser.add_argument("--file", default=VTEST, help="what the cameras show")
    parser.add_argument("--size", default="384x288", help="the clip's frame size (without --loop)")
    parser.add_argument("--loop", action="store_true",
                        help="--file is an H.264 clip already: sent as it is, in a loop")
    parser.add_argument("--detector", default="cvdetect model=hog-people")
    parser.add_argument("--source", default="",
                        help="a source description for every camera, URL standing for its URL "
                             "(e.g. rtspsrc location=URL ! rtph264depay ! h264parse ! nvh264dec)")
    parser.add_argument("--faults", choices=["random", "burst", "gpu"], default="random")
    parser.add_argument("--gpus", help="the service's gpus key (default: all)")
    parser.add_argument("--burst", type=int, default=4)
    parser.add_argument("--burst-every", type=float, default=60)
    parser.add_argument("--down", type=float, default=20)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--work", help="keep logs and outputs here (default: a temporary folder)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = args.work or tempfile.mkdtemp(prefix="cudanms-soak-")
    os.makedirs(work, exist_ok=True)
    print("chaos soak: %d cameras, %.1f min, faults %s, seed %d, in %s" %
          (args.cameras, args.minutes, args.faults, args.seed, work), flush=True)

    clip = args.file
    if not args.loop:
        width, height = args.size.split("x")
        clip = os.path.join(work, "clip.h264")
        subprocess.run(
            ["gst-launch-1.0", "-q", "filesrc", "location=" + args.file, "!", "decodebin", "!",
             "identity", "eos-after=301", "!", "videoconvert", "!", "videoscale", "!",
             "video/x-raw,width=%s,height=%s" % (width, height), "!", "x264enc",
             "speed-preset=fast", "key-int-max=30", "bframes=0", "!",
             "video/x-h264,stream-format=byte-stream",
             "!", "filesink", "location=" + clip], check=True)
    server_args = ["--loop", clip]
    cameras = [Camera("cam%d" % i, work, server_args) for i in range(args.cameras)]
    for camera in cameras:
        camera.start()
    config = os.path.join(work, "cameras.conf")
    with open(config, "w") as f:
        f.write("[service]\nmetrics-address = 127.0.0.1:0\ndetector = %s\njson = %s/{camera}.jsonl\n"
                % (args.detector, work))
        if args.gpus:
            f.write("gpus = %s\n" % args.gpus)
        for camera in cameras:
            if args.source:
                f.write("\n[camera.%s]\nsource = %s\n" %
                        (camera.name, args.source.replace("URL", camera.url)))
            else:
                f.write("\n[camera.%s]\nurl = %s\n" % (camera.name, camera.url))
    service = Service(config, work)
    started = time.monotonic()
    end = started + args.minutes * 60
    rss = []  # (minutes, KiB): every process of the service together
    rss_each = {}  # process -> [(minutes, KiB)]
    recoveries = []  # dict per return
    bursts = []
    crashed = False
    next_rss = started

    heap = []  # (minutes, KiB): malloc's bytes in use, from /metrics

    def sample_rss():
        nonlocal next_rss
        if time.monotonic() >= next_rss:
            minutes = (time.monotonic() - started) / 60
            each = service.rss_by_process()
            rss.append((minutes, sum(each.values())))
            for name, kib in each.items():
                rss_each.setdefault(name, []).append((minutes, kib))
            try:
                in_use = service.metrics().get(("cudanms_process_heap_bytes", "", ""))
                if in_use is not None:
                    heap.append((minutes, int(in_use / 1024)))
            except OSError:
                pass
            next_rss += 10

    def idle(seconds):
        """Sleeps, sampling RSS; False when the service died."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            if service.process.poll() is not None:
                return False
            sample_rss()
            time.sleep(0.2)
        return True

    def measure_recovery(returned_cameras, kind, returned):
        """Waits for the frames of every camera that just returned, side by side."""
        before = {c.name: service.frames(c.name) for c in returned_cameras}
        waiting = list(returned_cameras)
        while waiting and time.monotonic() - returned < 120:
            metrics = service.metrics()
            now = time.monotonic()
            for camera in [c for c in waiting if service.frames(c.name, metrics) > before[c.name]]:
                waiting.remove(camera)
                recovery = now - returned
                left = service.wait_left(camera.name, returned)
                recoveries.append({"camera": camera.name, "fault": kind,
                                   "recovery_s": round(recovery, 2),
                                   "backoff_left_s": round(left, 2),
                                   "within": recovery <= left + 2.0})
                print("  %s back after %s: frames again %.1f s after the server returned "
                      "(back-off had %.1f s left)" % (camera.name, kind, recovery, left),
                      flush=True)
            if waiting and not idle(0.2):
                return
        for camera in waiting:
            recoveries.append({"camera": camera.name, "fault": kind, "recovery_s": None,
                               "backoff_left_s": None, "within": False})
            print("  %s did not come back within 120 s" % camera.name, flush=True)

    # Everyone streams first.
    deadline = time.monotonic() + 60
    while not all(service.frames(c.name) > 0 for c in cameras):
        if time.monotonic() > deadline:
            sys.exit("not every camera streams after 60 s: see %s/service.log" % work)
        time.sleep(0.5)

    while time.monotonic() < end and not crashed:
        if args.faults == "random":
            if not idle(rng.uniform(30, 60)) or time.monotonic() >= end:
                crashed = service.process.poll() is not None
                break
            camera = rng.choice(cameras)
            kind = rng.choice(["kill", "stop"])
            print("%6.1f min: %s %s" % ((time.monotonic() - started) / 60, kind, camera.name),
                  flush=True)
            camera.kill() if kind == "kill" else camera.stop()
            if not idle(rng.uniform(5, 20)):
                crashed = True
                break
            camera.start() if kind == "kill" else camera.resume()
            measure_recovery([camera], kind, time.monotonic())
        else:
            if not idle(max(0.0, args.burst_every - args.down - 10)):
                crashed = True
                break
            m0 = service.metrics()
            t0 = time.monotonic()
            gpu = None
            if args.faults == "gpu":
                placed = {c.name: m0.get(("cudanms_camera_gpu", c.name, ""), -1) for c in cameras}
                used = sorted(set(g for g in placed.values() if g >= 0))
                if not used:
                    sys.exit("--faults gpu: the service placed no camera on a GPU")
                gpu = int(used[len(bursts) % len(used)])
                victims = [c for c in cameras if placed[c.name] == gpu]
            else:
                victims = rng.sample(cameras, args.burst)
            others = [c for c in cameras if c not in victims]
            idle(10)
            m1 = service.metrics()
            t1 = time.monotonic()
            print("%6.1f min: kill %s%s for %.0f s" %
                  ((t1 - started) / 60, " ".join(c.name for c in victims),
                   "" if gpu is None else " (GPU %d's)" % gpu, args.down), flush=True)
            for c in victims:
                c.kill()
            if not idle(args.down):
                crashed = True
                break
            m2 = service.metrics()
            t2 = time.monotonic()
            for c in victims:
                c.start()
            measure_recovery(victims, "kill", time.monotonic())
            before = {c.name: (service.frames(c.name, m1) - service.frames(c.name, m0)) / (t1 - t0)
                      for c in others}
            during = {c.name: (service.frames(c.name, m2) - service.frames(c.name, m1)) / (t2 - t1)
                      for c in others}
            worst = min(during[n] / before[n] for n in before if before[n] > 0)
            bursts.append({"killed": [c.name for c in victims], "gpu": gpu,
                           "others_worst_ratio": worst,
                           "others_fps_before": sum(before.values()),
                           "others_fps_during": sum(during.values())})
            print("  the other %d: %.1f frames/s before, %.1f during (worst camera at %.1f%%)" %
                  (len(others), sum(before.values()), sum(during.values()), 100 * worst), flush=True)
        crashed = service.process.poll() is not None

    # The end: the servers stopped, so that what they sent and what arrived can be compared.
    for camera in cameras:
        camera.stop()
    time.sleep(3)
    alive = service.process.poll() is None
    metrics = service.metrics() if alive else {}
    rss.append(((time.monotonic() - started) / 60, service.rss_kib() if alive else 0))
    stop_sent = time.monotonic()
    exit_code = None
    if alive:
        service.process.send_signal(signal.SIGTERM)
        exit_code = service.process.wait(timeout=30)
    stop_seconds = time.monotonic() - stop_sent
    for camera in cameras:
        camera.kill()

    delivered = {c.name: service.frames(c.name, metrics) for c in cameras}
    served = {c.name: c.served() for c in cameras}
    reconnects = {c.name: metrics.get(("cudanms_camera_reconnects_total", c.name, ""), 0)
                  for c in cameras}
    after_first = [(t, k) for t, k in rss if t >= 1.0] or rss
    slope = slope_per_minute(after_first)
    # The heap's own slope: RSS that grows while the heap does not is not a malloc leak (the
    # allocator's arenas, thread stacks, the CUDA driver's mappings).
    heap_slope = slope_per_minute([(t, k) for t, k in heap if t >= 1.0] or heap)
    times = [r["recovery_s"] for r in recoveries if r["recovery_s"] is not None]
    figures = {
        "minutes": round((time.monotonic() - started) / 60, 2), "cameras": args.cameras,
        "faults": len(recoveries), "kills": sum(r["fault"] == "kill" for r in recoveries),
        "stops": sum(r["fault"] == "stop" for r in recoveries),
        "crashes": int(crashed or (exit_code not in (0, None))),
        "exit_code": exit_code, "stop_seconds": round(stop_seconds, 2),
        "rss_kib_first_minute": after_first[0][1], "rss_kib_end": rss[-1][1],
        "rss_slope_kib_per_min": round(slope, 1),
        "rss_samples_min_kib": [(round(t, 2), k) for t, k in rss],
        "rss_by_process": {
            name: {"kib_first_minute": ([k for t, k in samples if t >= 1.0] or [0])[0],
                   "kib_end": samples[-1][1],
                   "slope_kib_per_min": round(slope_per_minute(
                       [(t, k) for t, k in samples if t >= 1.0] or samples), 1)}
            for name, samples in rss_each.items()},
        "heap_slope_kib_per_min": round(heap_slope, 1),
        "heap_samples_min_kib": [(round(t, 2), k) for t, k in heap],
        "reconnects": reconnects, "reconnects_total": sum(reconnects.values()),
        "recovery_p50_s": percentile(times, 0.5), "recovery_p99_s": percentile(times, 0.99),
        "recoveries_within_backoff_plus_2s": "%d of %d" % (sum(r["within"] for r in recoveries),
                                                            len(recoveries)),
        "delivered": delivered, "served": served,
        "delivered_percent": round(100.0 * sum(delivered.values()) / max(1, sum(served.values())), 2),
        "bursts": bursts, "recoveries": recoveries, "seed": args.seed, "work": work,
        "gpu_memory_mib": {"%s{%s}" % (name, rest): round(value / 2 ** 20)
                           for (name, _, rest), value in metrics.items() if "gpu_memory" in name},
    }
    print("\ncrashes %d (service exit %s after SIGTERM, %.2f s)" %
          (figures["crashes"], exit_code, stop_seconds))
    print("RSS %d KiB after the first minute, %d KiB at the end, slope %.1f KiB/min" %
          (figures["rss_kib_first_minute"], figures["rss_kib_end"], slope))
    for name, each in sorted(figures["rss_by_process"].items()):
        print("  %s: %d KiB after the first minute, %d KiB at the end, slope %.1f KiB/min" %
              (name, each["kib_first_minute"], each["kib_end"], each["slope_kib_per_min"]))
    if heap:
        print("heap (malloc's bytes in use) %d KiB after the first minute, %d KiB at the end, "
              "slope %.1f KiB/min" % (heap[0][1], heap[-1][1], heap_slope))
    print("faults %d (%d kills, %d stops), reconnects %d" %
          (figures["faults"], figures["kills"], figures["stops"], figures["reconnects_total"]))
    print("recovery after the server returned: p50 %.1f s, p99 %.1f s; within back-off + 2 s: %s" %
          (figures["recovery_p50_s"], figures["recovery_p99_s"],
           figures["recoveries_within_backoff_plus_2s"]))
    if figures["gpu_memory_mib"]:
        print("GPU memory (MiB): %s" % figures["gpu_memory_mib"])
    print("frames delivered %d of %d served (%.2f%%)" %
          (sum(delivered.values()), sum(served.values()), figures["delivered_percent"]))
    for c in cameras:
        print("  %s: %d of %d, %d reconnects" % (c.name, delivered[c.name], served[c.name],
                                                   reconnects[c.name]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0 if figures["crashes"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
