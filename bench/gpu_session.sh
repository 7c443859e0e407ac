#!/usr/bin/env bash
# Several recipes' GPU runs in one lease of a multi-GPU node, offline, through envbuild
# (its runs are written up under docs/results/). Run on the node from the repository root.
#
#   bash bench/gpu_session.sh stage            # copy the carried bundles to $STATE (each call)
#   bash bench/gpu_session.sh start PLANFILE   # start the session's plan in its own session
#   bash bench/gpu_session.sh wait 550         # follow it, then copy results to $OUT
#
# What prepare made (bench/h100_offline_prepare.sh, once per recipe) is carried as
# .device/<job>/bundle.tar, with envbuild's wheels and a clean export of the commit in
# .device/common/{whl,src}. A bundle too big to travel with the others comes in a later call:
# `stage` copies what this call carried and the plan waits for it.
#
# The plan, one line each (# comments):
#   install JOB=RECIPE [JOB=RECIPE ...]   provision each from its bundle with --no-smoke (installs
#                                         and builds only), all of the line in parallel; the line
#                                         after waits for them. The first line is one recipe alone:
#                                         the Apex wheel it builds lands in the controller's build
#                                         cache, and the later recipes with the same Apex commit,
#                                         options, torch and arch list reuse it (same cache key).
#   smoke JOB@GPUS [JOB@GPUS ...]         one wave: each job's smoke step again (--from-step smoke:
#                                         the built-in GPT and NCCL smokes, then the recipe's own
#                                         benchmark, judged), CUDA_VISIBLE_DEVICES=GPUS, the jobs of
#                                         a wave on disjoint GPUs at the same time.
# Every line's wall time and exit codes go to $STATE/phases.tsv; each smoke's run folder is
# listed in $STATE/runs.tsv (job, gpus, exit code, run folder).
set -u
STATE=${STATE:-/root/eb-session}
EBV=${EBV:-/root/ebvenv}
OUT=${OUT:-$STATE/out}
DEV=${DEV:-$(pwd)/.device}
SMOKE=${SMOKE:-350m}
TARGET=${TARGET:-h100-venv}
export LC_ALL=C.UTF-8 LANG=C.UTF-8 PYTHONUNBUFFERED=1 ENVBUILD_HOME=${ENVBUILD_HOME:-/root/.envbuild}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
EB="$EBV/bin/python -m envbuild"

log() { echo "[$(date +%T)] $*"; }

setup() {
  if [ ! -x "$EBV/bin/python" ]; then
    /usr/bin/python3 -m venv --without-pip "$EBV" || return 1
    python3 -m pip --python "$EBV/bin/python" install -q --no-index --no-deps "$STATE/common/whl"/*.whl || return 1
    echo "$STATE/common/src" > "$("$EBV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/envbuild-checkout.pth"
  fi
  grep -qs '^NCCL_NVLS_ENABLE=0' /etc/nccl.conf || echo 'NCCL_NVLS_ENABLE=0' >> /etc/nccl.conf
  { echo "gpus: $(nvidia-smi -L | wc -l)"; nvidia-smi -L; grep -E 'MemTotal|MemAvailable' /proc/meminfo; nproc; } > "$STATE/node.txt" 2>&1
  $EB --version
}

bundle_of() {  # wait up to 20 min for a later call to stage JOB's bundle
  local job=$1 t0; t0=$(date +%s)
  while [ ! -f "$STATE/bundles/$job.tar" ]; do
    [ $(( $(date +%s) - t0 )) -gt 1200 ] && { log "no bundle for $job after 1200 s"; return 1; }
    sleep 5
  done
  echo "$STATE/bundles/$job.tar"
}

install_one() {  # JOB RECIPE: provision from the bundle, no smoke
  local job=$1 recipe=$2 bundle
  mkdir -p "$STATE/$job"
  echo "$recipe" > "$STATE/$job/recipe"
  bundle=$(bundle_of "$job") || return 1
  $EB provision "$recipe" --target "$TARGET" --hosts local --bundle "$bundle" --no-smoke --json \
      > "$STATE/$job/install.jsonl" 2> "$STATE/$job/install.err"
}

smoke_one() {  # JOB GPUS: the smoke step again on those GPUs
  local job=$1 gpus=$2 recipe rc n
  recipe=$(cat "$STATE/$job/recipe")
  n=1; while [ -e "$STATE/$job/smoke-$n.jsonl" ]; do n=$((n + 1)); done
  CUDA_VISIBLE_DEVICES=$gpus $EB provision "$recipe" --target "$TARGET" --hosts local \
      --bundle "$STATE/bundles/$job.tar" --from-step smoke --smoke-preset "$SMOKE" --json \
      > "$STATE/$job/smoke-$n.jsonl" 2> "$STATE/$job/smoke-$n.err"
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$job" "$gpus" "$rc" "$(run_dir "$STATE/$job/smoke-$n.jsonl")" >> "$STATE/runs.tsv"
  return $rc
}

run_dir() {
  python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]; r=[x for x in r if x.get("type")=="result"] or r[-1:]; print(r[-1]["run_dir"] if r else "")' "$1" 2>/dev/null
}

line() {  # run one plan line: its jobs in parallel, wait for all
  local verb=$1; shift
  local pids=() rcs="" t0 item p
  t0=$(date +%s)
  for item in "$@"; do
    if [ "$verb" = install ]; then install_one "${item%%=*}" "${item#*=}" & else smoke_one "${item%%@*}" "${item#*@}" & fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
  printf '%s %s\t%d\t%s\n' "$verb" "$*" $(( $(date +%s) - t0 )) "${rcs# }" >> "$STATE/phases.tsv"
  log "$verb $*: exit codes${rcs} after $(( $(date +%s) - t0 )) s"
}

session() {
  local plan=$1 verb rest
  : > "$STATE/phases.tsv"; : > "$STATE/runs.tsv"
  setup || { log "setup failed"; touch "$STATE/done"; return 1; }
  while read -r verb rest; do
    case "$verb" in ''|'#'*) continue ;; esac
    # shellcheck disable=SC2086
    line "$verb" $rest
  done < "$plan"
  touch "$STATE/done"
}

collect() {  # results into $OUT (8 files at most): the runs' records, the states' logs
  mkdir -p "$OUT"
  cp "$STATE/phases.tsv" "$STATE/runs.tsv" "$STATE/node.txt" "$OUT/" 2>/dev/null
  [ -f "$STATE/session.log" ] && tail -c 2000000 "$STATE/session.log" > "$OUT/session.log"
  local dirs=() d
  while IFS=$'\t' read -r _ _ _ d; do [ -n "$d" ] && [ -d "$d" ] && dirs+=("$d"); done < "$STATE/runs.tsv"
  for d in "$STATE"/*/install.jsonl; do [ -f "$d" ] && dirs+=("$(run_dir "$d")"); done
  tar czf "$OUT/runs.tgz" --exclude='ansible/artifacts' --exclude='*.whl' \
      "${dirs[@]}" "$STATE"/*/install.err "$STATE"/*/smoke-*.err 2>/dev/null
  ls -la "$OUT"
}

case "${1:-}" in
  stage)
    mkdir -p "$STATE/bundles"
    [ -d "$STATE/common" ] || cp -r "$DEV/common" "$STATE/common" || exit 1
    for d in "$DEV"/*/; do
      j=$(basename "$d")
      [ -f "$d/bundle.tar" ] && [ ! -f "$STATE/bundles/$j.tar" ] && cp "$d/bundle.tar" "$STATE/bundles/$j.tar.part" \
          && mv "$STATE/bundles/$j.tar.part" "$STATE/bundles/$j.tar" && log "staged $j"
    done; true ;;
  start)
    [ -f "$STATE/started" ] && { echo "session already started"; exit 0; }
    cp "${2:?plan file}" "$STATE/plan" && date +%s > "$STATE/started"
    ( cd "$STATE/common/src" && setsid nohup bash "$STATE/common/src/bench/gpu_session.sh" session "$STATE/plan" \
        > "$STATE/session.log" 2>&1 < /dev/null & )
    sleep 2; echo "session started" ;;
  wait)
    limit=${2:-550}; t0=$(date +%s); seen=0
    while [ ! -f "$STATE/done" ] && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
      n=$(wc -l < "$STATE/phases.tsv" 2>/dev/null || echo 0)
      if [ "$n" != "$seen" ]; then tail -n $(( n - seen )) "$STATE/phases.tsv"; seen=$n; fi
      sleep 5
    done
    n=$(wc -l < "$STATE/phases.tsv" 2>/dev/null || echo 0)
    [ "$n" != "$seen" ] && tail -n $(( n - seen )) "$STATE/phases.tsv"
    [ -f "$STATE/done" ] && echo "session done" || echo "session still running after $limit s"
    collect ;;
  session) session "$2" ;;
  *) echo "usage: $0 stage | start PLANFILE | wait SECONDS | session PLANFILE" >&2; exit 2 ;;
esac
