#!/usr/bin/env python3
"""A site of many hosts on one machine, measured: docs/fleet.md's table, at sizes CI's two cores
cannot hold (tests/service/fleet/test_fleet_scale.cpp takes the same steps at 20 hosts).

    tools/fleet-scale.py --hosts 100 --cameras 3000 [--json FILE]

Starts a three-member etcd (Debian's etcd-server) on 127.0.0.1, imports CAMERAS cameras into a
site, and runs HOSTS hosts' agents in --processes processes (`cudanms-service fleet simulate`: the same
lease, registration, watch, plan, claims and releases as a real host's supervisor, cameras that
do nothing), a host's capacity twice its share. Measures the time until every camera is placed,
etcd's requests and bytes a second and the hosts' CPU and memory in a steady 10 s, the time until
a killed host's cameras are placed again, and the cameras that move when a tenth more hosts
join. Needs CUDANMS_BUILD (the build with cudanms-service) and etcd on PATH.
"""
import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TTL = 5  # fleet-ttl's default


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def b64(text):
    return base64.b64encode(text.encode()).decode()


def prefix_end(prefix):
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def post(endpoint, path, body, timeout=5):
    ask = urllib.request.Request(endpoint + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(ask, timeout=timeout) as answer:
        return json.loads(answer.read())


def eventually(seconds, check, interval=0.1):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


class Etcd:
    """Three members on 127.0.0.1, one cluster, in `work`."""

    def __init__(self, work, members=3):
        self.clients = [free_port() for _ in range(members)]
        peers = [free_port() for _ in range(members)]
        cluster = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(peers))
        self.processes = []
        for i in range(members):
            client, peer = f"http://127.0.0.1:{self.clients[i]}", f"http://127.0.0.1:{peers[i]}"
            log = open(os.path.join(work, f"etcd-m{i}.log"), "w")
            self.processes.append(subprocess.Popen(
                ["etcd", "--name", f"m{i}", "--data-dir", os.path.join(work, f"etcd-m{i}"),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--initial-cluster-token", "cudanms-scale"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        self.endpoints = [f"http://127.0.0.1:{p}" for p in self.clients]

    def healthy(self, seconds=30):
        def answers():
            try:
                post(self.endpoints[0], "/v3/kv/range", {"key": "AA=="})
                return True
            except OSError:
                return False
        return eventually(seconds, answers, 0.2)

    def work(self):
        """Unary requests handled and bytes in and out, every member together."""
        requests = sent = 0.0
        for endpoint in self.endpoints:
            with urllib.request.urlopen(endpoint + "/metrics", timeout=5) as answer:
                for line in answer.read().decode().splitlines():
                    if line.startswith("grpc_server_handled_total{"):
                        requests += float(line.rsplit(" ", 1)[-1])
                    elif line.startswith(("etcd_network_client_grpc_received_bytes_total ",
                                          "etcd_network_client_grpc_sent_bytes_total ")):
                        sent += float(line.rsplit(" ", 1)[-1])
        return requests, sent

    def owners(self, site):
        folder = f"/cudanms/{site}/owners/"
        reply = post(self.endpoints[0], "/v3/kv/range",
                     {"key": b64(folder), "range_end": b64(prefix_end(folder))}, 10)
        return {base64.b64decode(kv["key"]).decode()[len(folder):]:
                base64.b64decode(kv["value"]).decode() for kv in reply.get("kvs", [])}

    def stop(self):
        for p in self.processes:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


class Simulated:
    """`cudanms-service fleet simulate N`, asked on its stdin."""

    def __init__(self, argv, err):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(err, "w"), text=True, start_new_session=True)
        self.process.stderr_path = err

    def ask(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def running(self):
        return json.loads(self.ask("report"))["per_host"]

    def total(self):
        return sum(self.running().values())

    def cpu_s(self):
        fields = open(f"/proc/{self.process.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0

    def stop(self):
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class Hosts:
    """The hosts over several `simulate` processes, as a site's hosts each have their own CPU:
    one process's main loop runs all its hosts' agents, and a hundred on one core measure that
    core, not etcd nor the plan. Process p's hosts are named simP-1, simP-2, ..."""

    def __init__(self, service, host_text, hosts, processes, work):
        self.parts = []
        for p in range(processes):
            count = hosts // processes + (p < hosts % processes)
            config = os.path.join(work, f"host-{p}.conf")
            with open(config, "w") as f:
                f.write(host_text.replace("host-id = sim\n", f"host-id = sim{p}\n"))
            self.parts.append(Simulated(service + ["--config", config, "simulate", str(count)],
                                        os.path.join(work, f"simulated-{p}.err")))

    def report(self):
        return " ".join(part.ask("report") for part in self.parts)

    def running(self):
        out = {}
        for part in self.parts:
            out.update(part.running())
        return out

    def total(self):
        return sum(self.running().values())

    def cpu_s(self):
        return sum(part.cpu_s() for part in self.parts)

    def rss_mib(self):
        return sum(part.rss_mib() for part in self.parts)

    def kill(self, name):
        part = next(p for p in self.parts if name in p.running())
        return part.ask("kill " + name)

    def add(self, name):
        return self.parts[0].ask("add " + name)

    def log(self):
        return "".join(open(p.process.stderr_path).read() for p in self.parts)

    def stop(self):
        for part in self.parts:
            part.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--cameras", type=int, default=3000)
    parser.add_argument("--detector", default="brightspot",
                        help="the cameras' detector, an element this build has (never run)")
    parser.add_argument("--processes", type=int,
                        help="simulate processes the hosts are spread over (default: one for "
                        "each 10 hosts)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    hosts, cameras = args.hosts, args.cameras
    processes = args.processes or max(1, (hosts + 9) // 10)
    if not shutil.which("etcd") or not os.environ.get("CUDANMS_BUILD"):
        sys.exit("fleet-scale.py: needs etcd on PATH and CUDANMS_BUILD")
    service = [os.path.join(SOURCE, "pipelines", "service"), "fleet"]
    work = tempfile.mkdtemp(prefix="cudanms-fleet-scale-")
    etcd = Etcd(work)
    simulated = None
    try:
        assert etcd.healthy(), "etcd did not start: " + open(os.path.join(work, "etcd-m0.log")).read()
        endpoints = ",".join(etcd.endpoints)
        site = os.path.join(work, "site.conf")
        with open(site, "w") as f:
            f.write(f"[service]\ndetector = {args.detector}\n")
            for i in range(1, cameras + 1):
                f.write(f"[camera.cam{i}]\nurl = rtsp://127.0.0.1:9/cam{i}\n")
        subprocess.run(service + ["--fleet", endpoints, "--site", "scale", "import", site],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        capacity = 2 * ((cameras + hosts - 1) // hosts)
        host_text = (f"[service]\nfleet = {endpoints}\nsite = scale\nhost-id = sim\ngpus = none\n"
                     f"capacity = {capacity}\nmetrics-address = 127.0.0.1:0\n")
        started = time.monotonic()
        simulated = Hosts(service, host_text, hosts, processes, work)
        placed = eventually(240, lambda: simulated.total() == cameras, 0.2)
        placed_s = time.monotonic() - started
        busy = simulated.cpu_s() / placed_s / processes
        print(f"{hosts} hosts in {processes} processes: {'all' if placed else 'not all'} "
              f"{cameras} cameras placed in {placed_s:.1f} s, a process's CPU meanwhile "
              f"{100 * busy:.0f} % of a core", flush=True)
        assert placed, simulated.report()

        time.sleep(2)
        requests, sent = etcd.work()
        cpu, steady_from = simulated.cpu_s(), time.monotonic()
        time.sleep(10)
        requests_after, sent_after = etcd.work()
        steady_s = time.monotonic() - steady_from
        figures = {
            "hosts": hosts, "cameras": cameras, "placed_s": placed_s,
            "etcd_requests_per_s": (requests_after - requests) / steady_s,
            "etcd_kib_per_s": (sent_after - sent) / steady_s / 1024,
            "host_cpu_percent": 100 * (simulated.cpu_s() - cpu) / steady_s / hosts,
            "process_rss_mib": simulated.rss_mib(), "processes": processes,
            "cores": os.cpu_count()}

        running = simulated.running()
        dead = max(running, key=running.get)
        figures["dead_host_cameras"] = running[dead]
        assert simulated.kill(dead) == "killed"
        died = time.monotonic()
        assert eventually(TTL + 60, lambda: simulated.total() == cameras, 0.1), \
            simulated.report()
        figures["replaced_s"] = time.monotonic() - died

        settled = etcd.owners("scale")
        joining = max(1, hosts // 10)
        for i in range(1, joining + 1):
            assert simulated.add(f"new-{i}") == "added"
        share = cameras // (hosts - 1 + joining)

        def joined():
            now = simulated.running()
            return all(now.get(f"new-{i}", 0) >= share for i in range(1, joining + 1)) and \
                sum(now.values()) == cameras and now
        now = eventually(120, joined, 0.2)
        assert now, simulated.report()
        moved = sum(1 for camera, owner in etcd.owners("scale").items()
                    if settled.get(camera) != owner)
        figures.update({"joining": joining, "moved": moved,
                        "joined_took": sum(now.get(f"new-{i}", 0) for i in range(1, joining + 1))})
        print("| hosts | cameras | all placed | a dead host's cameras placed again | hosts that "
              "join: cameras moved (they took) | etcd, steady: requests/s | KiB/s | a host's CPU |"
              " the hosts' process |")
        print(f"| {hosts} | {cameras} | {placed_s:.1f} s | {figures['dead_host_cameras']} in "
              f"{figures['replaced_s']:.1f} s | {joining} join: {moved} ({figures['joined_took']}) | "
              f"{figures['etcd_requests_per_s']:.0f} | {figures['etcd_kib_per_s']:.0f} | "
              f"{figures['host_cpu_percent']:.2f} % | {figures['process_rss_mib']:.0f} MiB |")
        # A host that fenced itself (its renewals unanswered in time) is one the site could not
        # hold: the figures above are only what they seem with none.
        log = simulated.log()
        figures["fencings"] = log.count("fleet: fenced: ")
        figures["rejoins"] = log.count("joining again with a new lease")
        print(f"fencings: {figures['fencings']}, hosts joining again: {figures['rejoins']}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)
    finally:
        if simulated:
            simulated.stop()
        etcd.stop()
        errors = os.path.join(work, "simulated-0.err")
        if os.path.exists(errors):
            tail = open(errors).read().splitlines()[-5:]
            if tail:
                print("the first simulate's last lines:", *tail, sep="\n  ", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
