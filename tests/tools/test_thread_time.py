#!/usr/bin/env python3
"""tools/thread-time.py on a child of named threads: two that spin for 0.6 s ("work0", "work1", one
group), one that sleeps ("nap0"), two that wait for one lock the main thread holds ("wait0",
"wait1"); the groups, their cores and the child's exit status come back, and with --states where
each group was (the spinners running, the waiters asleep on the one futex word they share)."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "tools", "thread-time.py")

CHILD = r"""
import ctypes, sys, threading, time
libc = ctypes.CDLL(None)
def named(name, work):
    def run():
        libc.prctl(15, name.encode())  # PR_SET_NAME: the thread's comm
        work()
    return threading.Thread(target=run)
def spin():
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        pass
held = threading.Lock()
held.acquire()
def wait():
    held.acquire()
    held.release()
threads = [named("work0", spin), named("work1", spin), named("nap0", lambda: time.sleep(0.6)),
           named("wait0", wait), named("wait1", wait)]
for t in threads: t.start()
threads[0].join()
held.release()
for t in threads: t.join()
sys.exit(3)
"""


def main():
    failures = []
    run = subprocess.run([sys.executable, SCRIPT, "--busy", "work#", "--", sys.executable, "-c",
                          CHILD], capture_output=True, text=True, timeout=60)
    out = run.stdout
    if run.returncode != 3:
        failures.append(f"exit status {run.returncode}, not the child's 3: {run.stderr}")
    if not re.search(r"^thread-time: over \d+\.\d\d s: \d+\.\d\d cores running, \d+\.\d\d "
                     r"runnable without a CPU, \d+ times put on a CPU a second$", out, re.M):
        failures.append("no summary line")
    work = re.search(r"^  work# +x2 +running +(\d+\.\d\d) +waiting +(\d+\.\d\d)", out, re.M)
    # Two spinning threads (the GIL lets one run at a time): near a core between them, less on a
    # loaded machine.
    if not work or float(work.group(1)) < 0.1:
        failures.append("the spinning group is not there with its two threads and their core")
    nap = re.search(r"^  nap# +x1 +running +(\d+\.\d\d)", out, re.M)
    if nap and float(nap.group(1)) > 0.05:
        failures.append("the sleeping thread is said to have run")
    states = subprocess.run([sys.executable, SCRIPT, "--states", "--every", "0.005", "--busy",
                             "work#", "--", sys.executable, "-c", CHILD], capture_output=True,
                            text=True, timeout=60)
    if states.returncode != 3 or "thread-time: states over" not in states.stdout:
        failures.append(f"--states: status {states.returncode}, no states: {states.stderr}")
    if not re.search(r"^  work# +\d+\.\d: .*on a CPU", states.stdout, re.M):
        failures.append("--states: the spinners are not seen running")
    if not re.search(r"^  nap# +\d\.\d: S \w+", states.stdout, re.M):
        failures.append("--states: the sleeping thread is not seen asleep in a call")
    # Both waiters on one word: 2 threads on average there, less the span's ends when loaded.
    shared = re.search(r"^  0x[0-9a-f]+ in \S+: (\d+\.\d\d) \(wait# (\d+\.\d\d)\)",
                       states.stdout, re.M)
    if not shared or float(shared.group(2)) < 1.2:
        failures.append("--states: the two waiters are not seen on one futex word")
    out += states.stdout
    usage = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, timeout=60)
    if usage.returncode != 2 or "COMMAND" not in usage.stderr:
        failures.append(f"no command: status {usage.returncode}, not a usage error")
    for f in failures:
        print("FAIL:", f, "\n" + out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
