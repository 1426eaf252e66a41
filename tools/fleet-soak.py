#!/usr/bin/env python3
"""Chaos soak of a fleet (docs/fleet.md): three hosts share a site's cameras through etcd, and
one host at a time is killed or stopped for as long as you let it run. Not in CI.

    tools/fleet-soak.py [--minutes 10] [--cameras 24] [--hosts 3] [--every 60] [--json FILE]
    tools/fleet-soak.py --hosts 2 --host-gpus 0,1 --cameras 16 --faults kill --file CLIP.h264 \
        --detector "cudacascade model=..."      (a host per GPU, NVDEC: the GPU host's run)

Everything on 127.0.0.1, started here: an etcd (Debian's etcd-server; --etcd-members 3 for a
cluster), one pipelines/rtsp-server --cameras N --loop sending videotestsrc's ball (it crosses
the middle of each frame twice every 10 s; each camera counts it on a line there), the cameras
imported into etcd, and the hosts (pipelines/service with fleet = ..., gpus = none, the test
detector brightspot from the build's tests/service: the soak measures where cameras run, not a
detector). Every --every seconds one host, at random, is killed (SIGKILL to its supervisor and
its workers at once: the host is gone) and started again 5-15 s later, or its supervisor, which
holds its lease, is stopped (SIGSTOP) for the lease's TTL + 3 s and let go on.

Figures (goals from issue 53): cameras ever run by two hosts at once, from the camera server's
own count of each camera's clients (0); counts that went back, from every host's /metrics
(cudanms_line_crossings_total of each camera, sampled twice a second; 0); each camera of a
faulted host back (streaming on some host) within TTL + back-off + 2 s of the fault; frames
delivered (frame lines in the hosts' JSON) against frames the server sent (>= 99 %); and at
each fault the other hosts' cameras' frame rate over the 10 s after it against the 10 s before.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CUDANMS_BUILD", os.path.join(ROOT, "build"))
SAMPLE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_clip(path):
    raw = path + ".i420"
    subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "pattern=ball", "motion=wavy",
                    "num-buffers=200", "!",
                    "video/x-raw,width=160,height=120,framerate=10/1,format=I420", "!",
                    "videorate", "!", "video/x-raw,framerate=5/1", "!", "filesink",
                    "location=" + raw], check=True)
    subprocess.run(["gst-launch-1.0", "-q", "filesrc", "location=" + raw, "!", "rawvideoparse",
                    "width=160", "height=120", "format=i420", "framerate=10/1", "!", "x264enc",
                    "bframes=0", "key-int-max=10", "tune=zerolatency", "speed-preset=ultrafast",
                    "!", "h264parse", "!", "mp4mux", "!", "filesink", "location=" + path],
                   check=True)
    os.unlink(raw)


def group_spawn(argv, out, err):
    return subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)


class Etcd:
    def __init__(self, work, members):
        self.work, self.members = work, members
        self.client = [free_port() for _ in range(members)]
        self.peer = [free_port() for _ in range(members)]
        self.cluster = ",".join("m%d=http://127.0.0.1:%d" % (i, self.peer[i])
                                for i in range(members))
        self.processes = [self.start(i) for i in range(members)]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.endpoint(0) + "/health", timeout=1)
                return
            except OSError:
                time.sleep(0.2)
        sys.exit("etcd did not start: see %s" % work)

    def endpoint(self, i):
        return "http://127.0.0.1:%d" % self.client[i]

    def endpoints(self):
        return ",".join(self.endpoint(i) for i in range(self.members))

    def start(self, i):
        client, peer = self.endpoint(i), "http://127.0.0.1:%d" % self.peer[i]
        return group_spawn(
            ["etcd", "--name", "m%d" % i, "--data-dir", os.path.join(self.work, "etcd-m%d" % i),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", self.cluster, "--initial-cluster-state", "new"],
            subprocess.DEVNULL, open(os.path.join(self.work, "etcd-m%d.log" % i), "w"))

    def stop(self):
        for p in self.processes:
            p.kill()
            p.wait()


class Host:
    """pipelines/service --config NAME.conf in a session of its own: killed whole, or its
    supervisor (which holds the lease) stopped."""

    def __init__(self, name, work, endpoints, capacity, gpus):
        self.name, self.work = name, work
        self.config = os.path.join(work, name + ".conf")
        with open(self.config, "w") as f:
            f.write("[service]\nfleet = %s\nsite = soak\nhost-id = %s\ngpus = %s\n"
                    "capacity = %d\nmetrics-address = 127.0.0.1:0\njson = %s/%s-{camera}.jsonl\n"
                    % (endpoints, name, gpus, capacity, work, name))
        self.process, self.runs, self.stopped = None, 0, False

    def start(self):
        self.runs += 1
        self.log_path = os.path.join(self.work, "%s-%d.log" % (self.name, self.runs))
        self.process = group_spawn([os.path.join(ROOT, "pipelines", "service"), "--config",
                                    self.config], subprocess.DEVNULL, open(self.log_path, "w"))
        deadline = time.monotonic() + 60
        while not self.base():
            if time.monotonic() > deadline or self.process.poll() is not None:
                sys.exit("host %s did not start: see %s" % (self.name, self.log_path))
            time.sleep(0.1)

    def base(self):
        found = re.search(r"metrics at (http://\S+)/metrics", open(self.log_path).read())
        return found.group(1) if found else None

    def kill(self):
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def stop(self):
        self.process.send_signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self):
        self.process.send_signal(signal.SIGCONT)
        self.stopped = False

    def alive(self):
        return self.process is not None and not self.stopped

    def get(self, path):
        base = self.base()
        if not base:
            raise OSError("host %s does not listen yet" % self.name)
        return urllib.request.urlopen(base + path, timeout=2).read().decode()

    def streaming(self):
        health = json.loads(self.get("/health"))
        return {c for c, s in health.get("cameras", {}).items() if s.get("state") == "streaming"}

    def gpus(self):
        """{camera: the GPU it runs on (-1: the CPU)} from /metrics."""
        out = {}
        for line in self.get("/metrics").splitlines():
            found = SAMPLE.match(line)
            if found and line.startswith("cudanms_camera_gpu{"):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(2) or ""))
                out[labels.get("camera")] = int(float(found.group(3)))
        return out

    def crossings(self):
        """{(camera, line, direction): total} from /metrics."""
        out = {}
        for line in self.get("/metrics").splitlines():
            found = SAMPLE.match(line)
            if not found or not line.startswith("cudanms_line_crossings_total"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(2) or ""))
            key = (labels.get("camera"), labels.get("line"), labels.get("direction"))
            out[key] = out.get(key, 0) + float(found.group(3))
        return out


class Watcher(threading.Thread):
    """Twice a second: where each camera streams, and whether any count went back."""

    def __init__(self, hosts):
        super().__init__(daemon=True)
        self.hosts, self.running = hosts, True
        self.where = {}      # camera -> (host, since)
        self.last = {}       # (camera, line, direction) -> the highest count seen
        self.went_back = []  # (time, key, before, after)
        self.lock = threading.Lock()

    def run(self):
        while self.running:
            now = time.monotonic()
            seen = {}
            for host in self.hosts:
                if not host.alive():
                    continue
                try:
                    for camera in host.streaming():
                        seen[camera] = host.name
                    counts = host.crossings()
                except (OSError, ValueError):  # starting, or killed while answering
                    continue
                with self.lock:
                    for key, value in counts.items():
                        if value < self.last.get(key, 0):
                            self.went_back.append((now, key, self.last[key], value))
                        self.last[key] = max(self.last.get(key, 0), value)
            with self.lock:
                for camera, host in seen.items():
                    if self.where.get(camera, (None,))[0] != host:
                        self.where[camera] = (host, now)
                for camera in list(self.where):
                    if camera not in seen:
                        del self.where[camera]
            time.sleep(0.5)

    def on(self, host):
        with self.lock:
            return {c for c, (h, _) in self.where.items() if h == host}

    def streaming_since(self, camera):
        with self.lock:
            return self.where.get(camera, (None, None))


def frames_by_camera(work):
    """camera -> frame lines in every host's JSON lines (HOST-CAMERA.jsonl)."""
    out = {}
    for name in os.listdir(work):
        if name.endswith(".jsonl"):
            camera = name[:-len(".jsonl")].split("-", 1)[1]
            with open(os.path.join(work, name), errors="replace") as f:
                out[camera] = out.get(camera, 0) + sum(1 for line in f if '"boxes"' in line)
    return out


def frames_in(work):
    return sum(frames_by_camera(work).values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--cameras", type=int, default=24)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--every", type=float, default=60, help="seconds between faults")
    parser.add_argument("--etcd-members", type=int, default=1)
    parser.add_argument("--ttl", type=float, default=5, help="the hosts' fleet-ttl")
    parser.add_argument("--faults", default="kill,stop", help="what befalls a host: kill, stop")
    parser.add_argument("--file", help="an H.264 clip to send (default: the ball, made here)")
    parser.add_argument("--detector", default="brightspot", help="the cameras' detector")
    parser.add_argument("--host-gpus", help="host i runs on GPU i of this list (default: CPU)")
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    for tool in ("etcd", "gst-launch-1.0"):
        if not shutil.which(tool):
            sys.exit("%s is missing: run.sh installs it" % tool)
    os.environ["GST_PLUGIN_PATH"] = os.path.join(BUILD, "gst-plugin") + ":" + \
        os.path.join(BUILD, "tests", "service")
    work = tempfile.mkdtemp(prefix="cudanms-fleet-soak-")
    print("work folder:", work, flush=True)
    clip = args.file or os.path.join(work, "ball.mp4")
    if not args.file:
        make_clip(clip)
    gpus = args.host_gpus.split(",") if args.host_gpus else ["none"] * args.hosts
    if len(gpus) != args.hosts:
        sys.exit("--host-gpus names %d GPUs for %d hosts" % (len(gpus), args.hosts))
    etcd = Etcd(work, args.etcd_members)
    served = os.path.join(work, "served")
    clients = os.path.join(work, "clients")
    server = subprocess.Popen(
        [os.path.join(ROOT, "pipelines", "rtsp-server"), "--port", "0", "--address",
         "127.0.0.1", "--loop", "--cameras", str(args.cameras), "--mount", "/cam",
         "--count-file", served, "--clients-file", clients, clip],
        stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.log"), "w"), text=True)
    base = server.stdout.readline().strip()[:-1]
    site = os.path.join(work, "site.conf")
    with open(site, "w") as f:
        f.write("[service]\ndetector = %s\nlines = middle:0.5,0,0.5,1\nnormalized = true\n"
                "reconnect-initial = 1\n" % args.detector)
        for i in range(1, args.cameras + 1):
            f.write("\n[camera.cam%d]\nurl = %s%d\n" % (i, base, i))
    subprocess.run([os.path.join(ROOT, "pipelines", "service"), "fleet", "--fleet",
                    etcd.endpoints(), "--site", "soak", "import", site], check=True)
    capacity = -(-2 * args.cameras // args.hosts)  # room for the cameras on one host fewer
    hosts = [Host("h%d" % i, work, etcd.endpoints(), capacity, gpus[i])
             for i in range(args.hosts)]
    for host in hosts:
        host.start()
    watcher = Watcher(hosts)
    watcher.start()
    deadline = time.monotonic() + 60
    while sum(len(watcher.on(h.name)) for h in hosts) < args.cameras:
        if time.monotonic() > deadline:
            sys.exit("the cameras did not all stream within 60 s: see %s" % work)
        time.sleep(0.5)
    print("%d cameras streaming on %d hosts" % (args.cameras, args.hosts), flush=True)

    bound = args.ttl + 1 + 2  # TTL + the back-off's first wait + 2 s
    faults, recoveries, late = [], [], []
    start = time.monotonic()
    rng = random.Random()
    kinds = args.faults.split(",")
    rate_window = min(10.0, args.every / 3)
    while time.monotonic() - start < args.minutes * 60:
        next_fault = start + args.every * (1 + int((time.monotonic() - start) // args.every))
        if next_fault - start >= args.minutes * 60:
            break
        time.sleep(max(0, next_fault - rate_window - time.monotonic()))
        sample_a = frames_by_camera(work)
        time.sleep(max(0, next_fault - time.monotonic()))
        sample_b = frames_by_camera(work)
        host = rng.choice(hosts)
        kind = rng.choice(kinds)
        cameras = watcher.on(host.name)
        others = {c for h in hosts if h is not host for c in watcher.on(h.name)}
        at = time.monotonic()
        if kind == "kill":
            host.kill()
        else:
            host.stop()
        print("%6.0f s: %s %s (%d cameras)" % (at - start, kind, host.name, len(cameras)),
              flush=True)
        back = {}
        while time.monotonic() - at < bound + 10 and len(back) < len(cameras):
            for camera in cameras - set(back):
                where, since = watcher.streaming_since(camera)
                if where is not None and where != host.name and since > at:
                    back[camera] = since - at
            time.sleep(0.2)
        moved_to = set()  # where the faulted host's cameras run now: host, GPU
        for other in hosts:
            if other is host or not other.alive():
                continue
            try:
                moved_to |= {"%s gpu %d" % (other.name, gpu)
                             for camera, gpu in other.gpus().items() if camera in cameras}
            except (OSError, ValueError):
                pass
        time.sleep(max(0, at + rate_window - time.monotonic()))
        sample_c = frames_by_camera(work)
        ratios = [(sample_c.get(c, 0) - sample_b.get(c, 0)) /
                  max(1, sample_b.get(c, 0) - sample_a.get(c, 0)) for c in others]
        for camera in cameras:
            recoveries.append(back.get(camera, float("inf")))
            if back.get(camera, float("inf")) > bound:
                late.append((kind, host.name, camera, back.get(camera)))
        faults.append({"at_s": round(at - start, 1), "kind": kind, "host": host.name,
                       "cameras": len(cameras),
                       "back_s": sorted(round(v, 1) for v in back.values()),
                       "moved_to": sorted(moved_to),
                       "others_rate_min_percent": round(100 * min(ratios), 1) if ratios else None})
        if kind == "kill":
            time.sleep(max(0, rng.uniform(5, 15) - (time.monotonic() - at)))
            host.start()
        else:
            time.sleep(max(0, args.ttl + 3 - (time.monotonic() - at)))
            host.resume()
    time.sleep(10)
    watcher.running = False
    sent = int(open(served).read().strip() or 0)
    delivered = frames_in(work)
    most = max((int(line.split()[2]) for line in open(clients) if line.strip()), default=0)
    figures = {
        "minutes": args.minutes, "cameras": args.cameras, "hosts": args.hosts,
        "etcd_members": args.etcd_members, "ttl_s": args.ttl, "faults": faults,
        "cameras_run_twice": sum(1 for line in open(clients)
                                 if line.strip() and int(line.split()[2]) > 1),
        "most_clients_of_a_camera": most,
        "counts_went_back": len(watcher.went_back),
        "counts_went_back_first": [(round(t - start, 1), list(k), b, a)
                                   for t, k, b, a in watcher.went_back[:5]],
        "recoveries": len(recoveries),
        "recovery_p50_s": round(sorted(recoveries)[len(recoveries) // 2], 1) if recoveries else None,
        "recovery_max_s": round(max(recoveries), 1) if recoveries else None,
        "recovered_within_bound": len(recoveries) - len(late), "bound_s": bound,
        "late": late, "frames_sent": sent, "frames_delivered": delivered,
        "delivered_percent": round(100.0 * delivered / sent, 2) if sent else None,
    }
    for host in hosts:
        if host.stopped:
            host.resume()
        if host.process:
            host.process.send_signal(signal.SIGTERM)
    for host in hosts:
        if host.process:
            host.process.wait(timeout=20)
    server.terminate()
    server.wait()
    etcd.stop()
    print(json.dumps(figures, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    good = (figures["cameras_run_twice"] == 0 and figures["counts_went_back"] == 0 and not late
            and (figures["delivered_percent"] or 0) >= 99)
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
