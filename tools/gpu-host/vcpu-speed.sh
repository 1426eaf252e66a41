#!/usr/bin/env bash
# How fast this machine's CPUs are, and whether other CPUs' load slows them: one fixed loop
# (Python, 3 M iterations) pinned to each CPU named, three times, with nothing else running, then
# beside a spinning process on each CPU from 4 up (12 on a 16-CPU host). On a VM whose vCPUs
# share cores beneath it (the lent GPU hosts: `lscpu` says one thread a core) a CPU with nothing
# of its own runs the loop up to 2x slower beside others' load, or at one minute than at another:
# docs/performance.md, session 34.
#   tools/gpu-host/vcpu-speed.sh [CPU...]     (default 0 2; ms a loop, lower is faster)
set -euo pipefail
cpus=("$@")
[ $# -gt 0 ] || cpus=(0 2)
loop() {
  taskset -c "$1" python3 -c "
import time
t = time.perf_counter(); x = 0
for i in range(3000000): x += i * i
print(f'{(time.perf_counter() - t) * 1000:.0f}', end=' ')"
}
measure() {
  for c in "${cpus[@]}"; do
    echo -n "cpu$c ms "
    for _ in 1 2 3; do loop "$c"; done
    echo -n "| "
  done
  echo
}
lscpu | grep -E 'Model name|Thread\(s\) per core' | tr -s ' ' | paste -sd';'
echo -n "nothing else running: "
measure
last=$(($(nproc) - 1))
[ "$last" -ge 4 ] || { echo "fewer than 5 CPUs: no spinners beside CPUs 0-3"; exit 0; }
spinners=()
trap '[ ${#spinners[@]} -eq 0 ] || kill "${spinners[@]}" 2>/dev/null' EXIT
for c in $(seq 4 "$last"); do
  taskset -c "$c" sh -c 'while :; do :; done' &
  spinners+=($!)
done
sleep 0.5
echo -n "beside ${#spinners[@]} spinners on CPUs 4-$last: "
measure
