#!/usr/bin/env python3
"""Where a process's resident memory grows: /proc/PID/smaps read twice, the resident KiB of each
kind of mapping compared. RSS that grows while malloc's heap in use does not (the service's
cudanms_process_heap_bytes) is either malloc keeping freed memory (its arenas: "[heap]" and the
anonymous mappings of 64 MiB it reserves per arena) or memory malloc never saw: the CUDA driver's
mappings of /dev/nvidia*, pinned host memory, thread stacks.

    smaps-growth.py PID [--first SECONDS] [--last SECONDS]   (defaults 60 and 240)
"""
import argparse
import collections
import re
import sys
import time

HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$")
ARENA = 64 << 20  # glibc reserves each thread arena as 64 MiB (HEAP_MAX_SIZE on 64-bit)


def kind(start, end, path):
    if path:
        return path if not path.startswith("/") or "nvidia" in path else "file " + path
    size = end - start
    if size <= ARENA and (start % ARENA == 0 or size == ARENA):
        return "[anon: malloc arena]"
    if size >= ARENA:
        return "[anon >= 64 MiB]"
    return "[anon < 64 MiB]"


def snapshot(pid):
    totals = collections.Counter()
    current = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            found = HEADER.match(line)
            if found:
                current = kind(int(found.group(1), 16), int(found.group(2), 16),
                               found.group(3).strip())
            elif line.startswith("Rss:") and current:
                totals[current] += int(line.split()[1])
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pid", type=int)
    parser.add_argument("--first", type=float, default=60)
    parser.add_argument("--last", type=float, default=240)
    args = parser.parse_args()
    time.sleep(args.first)
    before = snapshot(args.pid)
    time.sleep(args.last - args.first)
    after = snapshot(args.pid)
    minutes = (args.last - args.first) / 60
    grown = sorted(set(before) | set(after), key=lambda k: after[k] - before[k], reverse=True)
    print("resident KiB by mapping, %.0f s and %.0f s after the start (growth a minute):" %
          (args.first, args.last))
    for k in grown[:12]:
        print("  %10d -> %10d  %+9.0f/min  %s" % (before[k], after[k],
                                                  (after[k] - before[k]) / minutes, k))
    print("  %10d -> %10d  %+9.0f/min  all" % (sum(before.values()), sum(after.values()),
                                               (sum(after.values()) - sum(before.values())) / minutes))


if __name__ == "__main__":
    sys.exit(main())
