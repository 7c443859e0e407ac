#!/usr/bin/env bash
# The offline H100 proof (docs/results/h100-offline.md), run on the GPU node from the repository
# root. The node has no network: everything comes from files bench/h100_offline_prepare.sh put
# in .device/ (the bundle, envbuild's own Python dependencies as wheels, a git .deb used only
# when the node has no git).
#
#   bash bench/h100_offline.sh start        # start the pipeline in its own session (idempotent)
#   bash bench/h100_offline.sh wait 560     # follow it for up to 560 s, copy results to $OUT
#   bash bench/h100_offline.sh pipeline     # the pipeline in the foreground (what start runs)
#
# The pipeline: envbuild's venv -> facts of the node -> preflight of every shipped recipe on it
# -> provision RECIPE from the bundle (--hosts local, --smoke-preset 350m) -> the same again (a
# no-op) -> verify -> a changed file of an installed package is caught by verify and repaired by
# one provision -> the reports -> the same Apex commit built with Apex's defaults, time-boxed by
# DEADLINE_S after the pipeline's start. Every phase's wall time and exit code go to
# $STATE/phases.tsv; `wait` writes summary.json with them.
#
# Overridable (a CPU rehearsal uses the cpu-reference bundle): RECIPE, TARGET, BUNDLE, SMOKE,
# STATE, DEADLINE_S, APEX_DEFAULT (0 to skip).
set -u
RECIPE=${RECIPE:-h100-megatron-deepspeed}
TARGET=${TARGET:-h100-venv}
BUNDLE=${BUNDLE:-.device/h100.tar}
SMOKE=${SMOKE:-350m}
STATE=${STATE:-/root/envbuild-h100-offline}
DEADLINE_S=${DEADLINE_S:-1080}
APEX_DEFAULT=${APEX_DEFAULT:-1}
EBV=${EBV:-/root/ebvenv}
OUT=${OUT:-$STATE/out}
REPO=${EB_SRC:-$(pwd)}  # envbuild's code: a clean export of the commit (prepare) when given
DEV=${DEV:-$(pwd)/.device}  # what prepare made: wheels, git .deb (absolute: the pipeline runs elsewhere)
export LC_ALL=C.UTF-8 LANG=C.UTF-8 PYTHONUNBUFFERED=1 ENVBUILD_HOME=${ENVBUILD_HOME:-/root/.envbuild}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
EB="$EBV/bin/python -m envbuild"

phase() {  # phase NAME CMD...: run, record wall seconds and exit code
  local name=$1; shift
  local t0 ms rc
  echo "=== $name: $*"
  t0=$(date +%s%N)
  "$@"; rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%s\t%d.%03d\t%s\n' "$name" $(( ms / 1000 )) $(( ms % 1000 )) "$rc" >> "$STATE/phases.tsv"
  echo "=== $name: exit $rc after $(( ms / 1000 )) s"
  return $rc
}

setup() {
  if ! command -v git >/dev/null; then
    echo "no git on the node: using the carried Debian git"
    mkdir -p /opt/gitroot && dpkg -x "$DEV/git.deb" /opt/gitroot
  fi
  # envbuild's own venv, from the carried wheels; envbuild itself from this checkout (.pth)
  if [ ! -x "$EBV/bin/python" ]; then
    /usr/bin/python3 -m venv --without-pip "$EBV" || return 1
    python3 -m pip --python "$EBV/bin/python" install -q --no-index --no-deps "$DEV"/whl/*.whl || return 1
    echo "$REPO" > "$("$EBV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/envbuild-checkout.pth"
  fi
  $EB --version
}

provision() {  # provision LOG extra...
  local log=$1; shift
  $EB provision "$RECIPE" --target "$TARGET" --hosts local --bundle "$BUNDLE" --smoke-preset "$SMOKE" \
      --json "$@" > "$STATE/$log" 2> "$STATE/$log.err"
}

checks() {
  local r
  for r in $($EB recipes --json | python3 -c 'import json,sys; print(" ".join(x["name"] for x in json.load(sys.stdin)))'); do
    $EB check "$r" --target local --facts "$STATE/facts.json" --json > "$STATE/check-$r.json" 2> "$STATE/check-$r.err"
    echo "check $r: exit $?"
  done
}

verify_to() { $EB verify --local --json > "$STATE/$1" 2>&1; }

helpers_probe() {  # Megatron's dataset index helpers alone, on this run's shapes (a crash shows here)
  ( cd "$PREFIX/src/megatron-deepspeed" && PYTHONFAULTHANDLER=1 timeout 120 "$PREFIX/bin/python" -c '
import numpy as np, pybind11, sys
from megatron.data import helpers
print("numpy", np.__version__, "pybind11", pybind11.__version__, helpers.__file__, flush=True)
sizes = np.full(4096, 2049, dtype=np.int32); doc_idx = np.arange(4096, dtype=np.int32)
s = helpers.build_sample_idx(sizes, doc_idx, 2048, 1, int(sizes.sum()))
print("build_sample_idx ok", s.shape, s.dtype, s[-1], flush=True)
' ) > "$STATE/helpers-probe.log" 2>&1
  local rc=$?; cat "$STATE/helpers-probe.log"; return $rc
}

drift() {  # change one installed file of a locked package; verify must name it
  local f
  # shellcheck disable=SC2012 # the first of two known paths
  f=$(ls -d "$PREFIX"/lib/python3*/site-packages/hjson/__init__.py "$PREFIX"/lib/python3*/site-packages/tqdm/__init__.py 2>/dev/null | head -1)
  echo "# changed by bench/h100_offline.sh" >> "$f"
  echo "changed $f"
  $EB verify --local --json > "$STATE/verify-drift.json" 2>&1
}

apex_default() {  # the same Apex commit, Apex's own defaults: no arch list, no parallelism settings
  local left=$(( DEADLINE_S - ($(date +%s) - START) ))
  [ "$left" -lt 60 ] && { echo "no time left for the default Apex build ($left s)"; echo "$left" > "$STATE/apex-default.bound"; return 0; }
  rm -rf /tmp/apex-default && git clone -q "$PREFIX/src/apex" /tmp/apex-default || return 1
  git -C /tmp/apex-default rev-parse HEAD > "$STATE/apex-default.sha"
  ( while sleep 2; do awk '/MemAvailable/{print $2}' /proc/meminfo; done ) > "$STATE/apex-default.mem" &
  local mon=$!
  echo "$left" > "$STATE/apex-default.bound"
  ( cd /tmp/apex-default && env -u TORCH_CUDA_ARCH_LIST -u MAX_JOBS -u NVCC_APPEND_FLAGS \
      APEX_CPP_EXT=1 APEX_CUDA_EXT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PATH="$PREFIX/bin:$PATH" \
      timeout "$left" "$PREFIX/bin/python" -m pip wheel --no-deps --no-build-isolation --no-index -v \
      --no-cache-dir -w /tmp/apex-default-wheel . ) > "$STATE/apex-default.log" 2>&1
  local rc=$?
  kill $mon
  find /tmp/apex-default/build -name '*.so' | sort > "$STATE/apex-default.sos"
  return $rc
}

pipeline() {
  mkdir -p "$STATE"; : > "$STATE/phases.tsv"
  START=$(date +%s); echo "$START" > "$STATE/started"
  phase setup setup || { touch "$STATE/done"; return 1; }
  if [ -d /opt/gitroot/usr/bin ]; then  # the carried git: on PATH before the facts record PATH
    export PATH="/opt/gitroot/usr/bin:$PATH" GIT_EXEC_PATH=/opt/gitroot/usr/lib/git-core
  fi
  git --version
  # NVLink multicast stays off on shared multi-GPU hosts (device KINDS.md): the variables above
  # reach every step through ansible's environment, and NCCL also reads /etc/nccl.conf
  grep -qs '^NCCL_NVLS_ENABLE=0' /etc/nccl.conf || echo 'NCCL_NVLS_ENABLE=0' >> /etc/nccl.conf
  { echo "gpus: $(nvidia-smi -L | wc -l)"; grep -E 'MemTotal|MemAvailable' /proc/meminfo;
    echo "cgroup memory.max: $(cat /sys/fs/cgroup/memory.max 2>/dev/null)"; nproc; } > "$STATE/node.txt"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv > "$STATE/nvidia-smi.csv" 2>&1
  # shellcheck disable=SC2086 # EB: the interpreter and -m envbuild
  phase facts $EB facts --local --json -o "$STATE/facts.json"
  phase checks checks
  phase provision-cold provision prov1.jsonl
  PREFIX=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]; print(json.load(open(r["run_dir"]+"/nodes/local/plan.json"))["prefix"])' "$STATE/prov1.jsonl" 2>/dev/null)
  export PREFIX; echo "prefix: $PREFIX"
  python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]["run_dir"])' "$STATE/prov1.jsonl" > "$STATE/cold_run" 2>/dev/null
  phase helpers-probe helpers_probe
  phase provision-noop provision prov2.jsonl
  phase verify verify_to verify.json
  phase verify-drift drift
  if [ "${REPAIR:-0}" = 1 ]; then  # reruns every step after the drifted one (on the H100: minutes)
    phase provision-repair provision prov3.jsonl
    phase verify-after-repair verify_to verify-repaired.json
  fi
  local cold; cold=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]["run_dir"])' "$STATE/prov1.jsonl")
  echo "$cold" > "$STATE/cold_run"
  $EB report "$cold" --format html -o "$STATE/report.html"
  $EB report "$cold" --format json -o "$STATE/report.json"
  [ "$APEX_DEFAULT" = 1 ] && phase apex-default apex_default
  touch "$STATE/done"
}

collect() {  # results into $OUT (8 files at most)
  mkdir -p "$OUT"
  "$EBV/bin/python" "$REPO/bench/h100_offline_collect.py" "$STATE" "$OUT/summary.json" || true
  for f in report.html report.json facts.json node.txt; do [ -f "$STATE/$f" ] && cp "$STATE/$f" "$OUT/"; done
  [ -f "$STATE/pipeline.log" ] && tail -c 3000000 "$STATE/pipeline.log" > "$OUT/pipeline.log"
  [ -f "$STATE/apex-default.log" ] && tail -c 2000000 "$STATE/apex-default.log" > "$OUT/apex-default.log"
  local cold; cold=$(cat "$STATE/cold_run" 2>/dev/null)
  [ -n "$cold" ] && tar czf "$OUT/run.tgz" -C "$(dirname "$cold")" "$(basename "$cold")" 2>/dev/null
  ls -la "$OUT"
}

case "${1:-}" in
  start)
    if [ -f "$STATE/started" ]; then echo "pipeline already started $(cat "$STATE/started")"; exit 0; fi
    mkdir -p "$STATE"
    # The pipeline runs from copies under $STATE: the device tool replaces the carried folder
    # (.device/) at each call, and a controller whose working directory vanished mid-run fails
    # (run 3's first smoke: ansible's fetch raised ENOENT from getcwd).
    rm -rf "${STATE:?}/src" "${STATE:?}/dev" && cp -r "$REPO" "$STATE/src" && cp "$BUNDLE" "$STATE/bundle.tar" \
        && cp -r "$DEV" "$STATE/dev" || exit 1
    ( cd "$STATE/src" && EB_SRC="$STATE/src" BUNDLE="$STATE/bundle.tar" DEV="$STATE/dev" \
        setsid nohup bash "$STATE/src/bench/h100_offline.sh" pipeline > "$STATE/pipeline.log" 2>&1 < /dev/null & )
    sleep 2; echo "pipeline started" ;;
  wait)
    limit=${2:-560}; t0=$(date +%s); seen=0
    while [ ! -f "$STATE/done" ] && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
      n=$(wc -l < "$STATE/phases.tsv" 2>/dev/null || echo 0)
      if [ "$n" != "$seen" ]; then tail -n $(( n - seen )) "$STATE/phases.tsv"; seen=$n; fi
      sleep 5
    done
    [ -f "$STATE/done" ] && echo "pipeline done" || echo "pipeline still running after $limit s"
    collect ;;
  pipeline) pipeline ;;
  *) echo "usage: $0 start | wait SECONDS | pipeline" >&2; exit 2 ;;
esac
