#!/usr/bin/env python3
"""Where a program's threads spend their time: on a CPU, or runnable without one.

    tools/thread-time.py [--every S] [--busy GROUPS] -- COMMAND [ARG...]

Runs COMMAND and reads each of its threads' /proc/PID/task/TID/schedstat (time on a CPU, time
runnable without one, times put on a CPU) every S seconds (default 0.05). Threads are grouped by
name with their digits as '#' (32 cameras' `src0:src` ... `src31:src` are one group, `src#:src`).
At the end it prints, over the span in which GROUPS (comma-separated name prefixes, default every
thread) were busy, the process's cores running and cores runnable without a CPU, and each group's
threads, cores and times put on a CPU a second, busiest first. It exits with COMMAND's status.

A chain short of CPUs shows as time runnable without one; each time a thread is put on a CPU after
a sleep is a wake that had to find a CPU (docs/performance.md, session 34: BlazeFace's 32 cameras
beside 12 busy cores waited ~80 us a wake on the lent VMs).

    tools/thread-time.py --busy 'src#,queue#' -- build/pipelines/cudanms-streams --preload ...
"""
import argparse
import os
import re
import subprocess
import sys
import time


def group_of(name):
    return re.sub(r"\d+", "#", name)


def read_threads(pid, names):
    """{tid: (ns on a CPU, ns runnable without one, times put on a CPU)} of the live threads."""
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            if tid not in names:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    names[tid] = group_of(f.read().strip())
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                threads[tid] = tuple(int(v) for v in f.read().split()[:3])
        except (OSError, ValueError):
            pass  # the thread has just ended
    return threads


def busy_span(samples, names, prefixes):
    """The first and last sample of the span in which threads of `prefixes` ran (a third of their
    busiest interval or more), or None."""
    def ran(a, b):
        return sum(v[0] - a[tid][0] for tid, v in b.items()
                   if tid in a and (not prefixes or names[tid].startswith(prefixes)))
    runs = [ran(samples[i][1], samples[i + 1][1]) for i in range(len(samples) - 1)]
    if not runs or max(runs) <= 0:
        return None
    busy = [i for i, r in enumerate(runs) if r >= max(runs) / 3]
    return busy[0], busy[-1] + 1


def report(samples, names, prefixes):
    span = busy_span(samples, names, prefixes)
    if span is None:
        print("thread-time: no thread of the named groups ran", file=sys.stderr)
        return
    first, last = span
    start = samples[first][1]
    end = {}  # each thread's last reading in the span: threads that ended take theirs along
    for _, threads in samples[first:last + 1]:
        end.update(threads)
    seconds = samples[last][0] - samples[first][0]
    groups = {}
    for tid, v in end.items():
        before = start.get(tid, (0, 0, 0))
        g = groups.setdefault(names[tid], [0, 0, 0, 0])
        for k in range(3):
            g[k] += v[k] - before[k]
        g[3] += 1
    running = sum(g[0] for g in groups.values()) / 1e9 / seconds
    waiting = sum(g[1] for g in groups.values()) / 1e9 / seconds
    puts = sum(g[2] for g in groups.values()) / seconds
    print(f"thread-time: over {seconds:.2f} s: {running:.2f} cores running, {waiting:.2f} "
          f"runnable without a CPU, {puts:.0f} times put on a CPU a second")
    for name, g in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        if g[0] == 0 and g[1] == 0:
            continue
        print(f"  {name:24} x{g[3]:<4} running {g[0] / 1e9 / seconds:6.2f}  waiting "
              f"{g[1] / 1e9 / seconds:6.2f}  put on a CPU {g[2] / seconds:8.0f}/s")


def main():
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].strip())
    parser.add_argument("--every", type=float, default=0.05, help="seconds between readings")
    parser.add_argument("--busy", default="", help="name prefixes whose running marks the span")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.every <= 0:
        parser.error("give a positive --every and the COMMAND after --")
    prefixes = tuple(p for p in args.busy.split(",") if p)
    child = subprocess.Popen(command)
    samples, names = [], {}
    while child.poll() is None:
        samples.append((time.monotonic(), read_threads(child.pid, names)))
        time.sleep(args.every)
    report(samples, names, prefixes)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
