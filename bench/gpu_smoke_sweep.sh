#!/usr/bin/env bash
# The built-in smoke as a GPU node's plan runs it (envbuild.plan.smoke.smoke_argv with the
# node's GPU count), on the lent multi-GPU machine, outputs into $OUT (default ./gpu-smoke-out):
#   collective.py --device cuda --nproc N  (NCCL, one rank per GPU, 1 MiB .. 1 GiB), twice;
#   the same with NCCL_P2P_DISABLE=1 (what a path without peer access gives: the floor's test);
#   gpt.py --preset tiny --device cuda (the default preset, on a GPU).
# Python: the first of $PYTHON, /opt/torch/.venv/bin/python, python3 that imports torch.
set -uo pipefail
OUT=${OUT:-gpu-smoke-out}
mkdir -p "$OUT"
PY=""
for p in ${PYTHON:-} /opt/torch/.venv/bin/python python3; do
  if "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
done
[[ -n "$PY" ]] || { echo "no python with torch" >&2; exit 3; }
date -u +%FT%TZ > "$OUT/date.txt"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv > "$OUT/nvidia-smi.csv" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
"$PY" -c 'import torch, sys; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count())' > "$OUT/torch.txt"
N=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
nproc > "$OUT/cpus.txt"
timed() {  # name, then the command: stdout to NAME.out, stderr to NAME.err, rc and seconds to NAME.rc
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local rc=$?
  echo "rc=$rc ms=$(( ($(date +%s%N) - t0) / 1000000 )) load=$(cut -d' ' -f1-3 /proc/loadavg)" > "$OUT/$name.rc"
  cat "$OUT/$name.rc"
}
timed collective-1 "$PY" envbuild/smoke/collective.py --json --device cuda --nproc "$N"
timed collective-2 "$PY" envbuild/smoke/collective.py --json --device cuda --nproc "$N"
timed collective-p2p-off env NCCL_P2P_DISABLE=1 "$PY" envbuild/smoke/collective.py --json --device cuda --nproc "$N"
timed gpt-tiny "$PY" envbuild/smoke/gpt.py --json --preset tiny --device cuda
