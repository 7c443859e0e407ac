#!/usr/bin/env bash
# usage: bash bench/busy.sh CMD...
# Runs CMD and prints its wall time and the machine's busy CPU seconds over it (/proc/stat:
# user+nice+system+irq+softirq+steal, all cores; neither idle nor iowait): what an A/B of a few
# test modules compares on a CPU-bound machine (bench/results/*-ab.json). Run nothing else beside it.
set -u
read -r _ u n s _ _ q sq st _ < /proc/stat
b0=$((u + n + s + q + sq + st))
t0=$(date +%s.%N)
"$@"
rc=$?
read -r _ u n s _ _ q sq st _ < /proc/stat
b1=$((u + n + s + q + sq + st))
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
echo "BUSY rc=$rc wall_s=$(echo "$t1 - $t0" | bc) busy_cpu_s=$(( (b1 - b0) / hz ))"
exit "$rc"
