#!/usr/bin/env python3
"""Where a program's threads spend their time: on a CPU, or runnable without one.

    tools/thread-time.py [--every S] [--busy GROUPS] [--states] -- COMMAND [ARG...]

Runs COMMAND and reads each of its threads' /proc/PID/task/TID/schedstat (time on a CPU, time
runnable without one, times put on a CPU) every S seconds (default 0.05). Threads are grouped by
name with their digits as '#' (32 cameras' `src0:src` ... `src31:src` are one group, `src#:src`).
At the end it prints, over the span in which GROUPS (comma-separated name prefixes, default every
thread) were busy, the process's cores running and cores runnable without a CPU, and each group's
threads, cores and times put on a CPU a second, busiest first. It exits with COMMAND's status.

--states also reads each thread's state and system call (/proc/PID/task/TID/stat and syscall) at
each reading and prints, a group, how many of its threads were on average on a CPU, runnable, or
asleep, and in which call; then the futex words slept on most, with the mapping each
lies in and the groups that slept there: one word many groups sleep on is a lock or a condition
they share, a word a thread is its own. Read them often (--every 0.002) for a fair picture.

A chain short of CPUs shows as time runnable without one; each time a thread is put on a CPU after
a sleep is a wake that had to find a CPU (docs/performance.md, session 34: BlazeFace's 32 cameras
beside 12 busy cores waited ~80 us a wake on the lent VMs).

    tools/thread-time.py --busy 'src#,queue#' -- build/pipelines/cudanms-streams --preload ...
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time


# x86-64 numbers of the calls a streaming thread sleeps in; others print as their number.
SYSCALLS = {0: "read", 1: "write", 7: "poll", 16: "ioctl", 23: "select", 24: "sched_yield",
            35: "nanosleep", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
            271: "ppoll", 281: "epoll_pwait"}


def group_of(name):
    return re.sub(r"\d+", "#", name)


def read_states(pid, tids):
    """{tid: (what it was doing, futex word or None)}: 'on a CPU', else the state letter (R
    runnable, S/D asleep) and the call it is in."""
    states = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                call = f.read().split()
        except (OSError, IndexError):
            continue
        if not call or call[0] == "running":
            states[tid] = ("on a CPU", None)
            continue
        number = int(call[0]) if call[0].lstrip("-").isdigit() else -1
        name = "no call" if number < 0 else SYSCALLS.get(number, str(number))
        word = int(call[1], 16) if number == 202 and len(call) > 1 else None
        states[tid] = (f"{state} {name}", word)
    return states


def mappings(pid):
    """[(start, end, name)] of the process's memory, for naming a futex word's place."""
    out = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split()
                start, end = (int(x, 16) for x in fields[0].split("-"))
                name = os.path.basename(fields[5]) if len(fields) > 5 else "[anon]"
                out.append((start, end, name))
    except OSError:
        pass
    return out


def place_of(word, maps):
    return next((name for start, end, name in maps if start <= word < end), "?")


def read_threads(pid, names):
    """{tid: (ns on a CPU, ns runnable without one, times put on a CPU)} of the live threads."""
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            # Read each time: a thread names itself once it starts its work (GStreamer's
            # streaming threads as their task begins), after it was first seen.
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names[tid] = group_of(f.read().strip())
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                threads[tid] = tuple(int(v) for v in f.read().split()[:3])
        except (OSError, ValueError):
            pass  # the thread has just ended
    return threads


def busy_span(samples, names, prefixes):
    """The first and last sample of the span in which threads of `prefixes` ran (a third of their
    busiest interval or more), or None. Intervals of 50 ms at least: frequent readings (--states)
    would make one short burst the busiest."""
    step = 1
    while step < len(samples) - 1 and samples[step][0] - samples[0][0] < 0.05:
        step += 1
    def ran(a, b):
        return sum(v[0] - a[tid][0] for tid, v in b.items()
                   if tid in a and (not prefixes or names[tid].startswith(prefixes)))
    marks = list(range(0, len(samples), step))
    runs = [ran(samples[i][1], samples[j][1]) for i, j in zip(marks, marks[1:])]
    if not runs or max(runs) <= 0:
        return None
    busy = [k for k, r in enumerate(runs) if r >= max(runs) / 3]
    return marks[busy[0]], marks[busy[-1] + 1]


def report_states(states, names, maps):
    """Each group's threads by what they were doing, on average over the readings; the futex words
    slept on most."""
    if not states:
        return
    doing, words = collections.Counter(), collections.Counter()
    for reading in states:
        for tid, (what, word) in reading.items():
            doing[(names.get(tid, "?"), what)] += 1
            if word is not None:
                words[(word, names.get(tid, "?"))] += 1
    n = len(states)
    threads = collections.Counter()
    for (group, _), count in doing.items():
        threads[group] += count
    print(f"thread-time: states over {n} readings (threads on average):")
    for group, total in threads.most_common():
        row = sorted(((c, what) for (g, what), c in doing.items() if g == group), reverse=True)
        print(f"  {group:24} {total / n:5.1f}: " +
              ", ".join(f"{w} {c / n:.2f}" for c, w in row[:6]))
    by_word = collections.Counter()
    for (word, _), count in words.items():
        by_word[word] += count
    if by_word:
        print("thread-time: futex words slept on most (threads on average):")
    for word, count in by_word.most_common(8):
        groups = sorted(((c, g) for (w, g), c in words.items() if w == word), reverse=True)
        print(f"  {word:#x} in {place_of(word, maps)}: {count / n:.2f} (" +
              ", ".join(f"{g} {c / n:.2f}" for c, g in groups[:3]) + ")")


def report(samples, names, prefixes, maps):
    span = busy_span(samples, names, prefixes)
    if span is None:
        print("thread-time: no thread of the named groups ran", file=sys.stderr)
        return
    first, last = span
    start = samples[first][1]
    end = {}  # each thread's last reading in the span: threads that ended take theirs along
    for _, threads, _ in samples[first:last + 1]:
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
    report_states([states for _, _, states in samples[first:last + 1] if states], names, maps)


def main():
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].strip())
    parser.add_argument("--every", type=float, default=0.05, help="seconds between readings")
    parser.add_argument("--busy", default="", help="name prefixes whose running marks the span")
    parser.add_argument("--states", action="store_true",
                        help="also where each group's threads sleep, and on which futex words")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.every <= 0:
        parser.error("give a positive --every and the COMMAND after --")
    prefixes = tuple(p for p in args.busy.split(",") if p)
    child = subprocess.Popen(command)
    samples, names, maps = [], {}, []
    while child.poll() is None:
        threads = read_threads(child.pid, names)
        states = read_states(child.pid, threads) if args.states else None
        if states and len(samples) % 20 == 0:  # the libraries and heap as they grow
            maps = mappings(child.pid) or maps
        samples.append((time.monotonic(), threads, states))
        time.sleep(args.every)
    report(samples, names, prefixes, maps)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
