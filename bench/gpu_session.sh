#!/usr/bin/env bash
# Several recipes' GPU runs in one lease of a multi-GPU node, offline, through envbuild
# (its runs are written up under docs/results/). Run on the node from the repository root.
#
#   bash bench/gpu_session.sh stage            # copy the carried bundles to $STATE (each call)
#   bash bench/gpu_session.sh start PLANFILE   # start the session's plan in its own session
#   bash bench/gpu_session.sh wait 550         # follow it, then copy results to $OUT
#   bash bench/gpu_session.sh harvest          # the build cache's wheels and tree archives into $OUT/prebuilt, in parts
#
# What bench/gpu_prepare.sh PLAN MIRRORS made is carried as .device/<job>/bundle.tar (with its
# bundle.sha256), envbuild's wheels, the commit's id and the stall tools as
# .device/common/{whl,src.commit,tools} (the commit's source is the working tree every call carries,
# copied by `stage`; an export in .device/common/src or src.tar.gz is read instead), and the plan
# as .device/plan.txt. A bundle too big to travel with the others comes in a later call (prepare
# prints which paths each call carries): `stage` copies what this call carried and the plan waits
# for it.
#
# The plan, one line each (# comments):
#   install JOB=RECIPE [JOB=RECIPE ...]   provision each from its bundle with --no-smoke (installs
#                                         and builds only), all of the line in parallel; the line
#                                         after waits for them. A job's install again is envbuild's
#                                         no-op on what is there (install-2.jsonl), timed alike.
#                                         The first line is one recipe alone: the Apex wheel it builds lands in the controller's build
#                                         cache, and the later recipes with the same Apex commit,
#                                         options, torch and arch list reuse it (same cache key).
#   wipe:JOB (an item of a line)         remove the environment JOB's last install made (the prefix
#                                         of its plan), keeping the node's build cache: JOB's next
#                                         install is cold again, as on the next node of the kind,
#                                         and restores or installs what the first one built
#   load@GPUS (an item of a line)        a co-located load on those GPUs while the line's other items
#                                         run (bench/gpu_load.py: bf16 matmul bursts, LOAD_DUTY of each
#                                         100 ms busy, default 0.15), its record in load-lineN-gpuG.json;
#                                         the GPUs' settings are never changed
#   smoke JOB@GPUS [JOB@GPUS ...]         one wave: each job's smoke step again (--from-step smoke:
#                                         the built-in GPT and NCCL smokes, then the recipe's own
#                                         benchmark, judged), CUDA_VISIBLE_DEVICES=GPUS, the jobs of
#                                         a wave on disjoint GPUs at the same time.
# A line may mix both kinds of item (an install on the CPUs beside a wave on the GPUs). A job
# whose install ended other than 0 or 5, or whose last smoke ended other than 0 (PASS), 1 (FAIL:
# a verdict, repeated like any other) or 5 (NOT JUDGED), is not run again:
# its later smokes are skipped (exit code 200 in phases.tsv), so a lease is not spent repeating
# a failure.
# `wait` on a machine where no session was started (a fresh machine: the lease was lost) says so
# and exits 3 at once, without polling.
# Every line's wall time and exit codes go to $STATE/phases.tsv; each smoke's run folder is
# listed in $STATE/runs.tsv (job, gpus, exit code, run folder).
#
# STALL=JOB:NAME:SECONDS watches JOB's smokes: when the newest file called NAME under
# $ENVBUILD_HOME (the benchmark's log) stops growing for SECONDS, each worker process (command
# line matching $STALL_PROC, default pretrain_gpt, whose parent matches it too) gets its threads
# recorded (/proc: name, state, wchan, CPU ticks), its native stacks (eu-stack) and Python stacks
# (py-spy dump --native) into $STATE/JOB/stall-N/, then SIGABRT (PYTHONFAULTHANDLER prints every
# Python thread), so a hang ends with its evidence instead of running to the benchmark's bound.
# The tools come from $STATE/common/tools (a py-spy wheel, elfutils .debs), prepared with network.
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
  { echo "gpus: $(nvidia-smi -L | wc -l)"; nvidia-smi -L; grep -E 'MemTotal|MemAvailable' /proc/meminfo; nproc
    lscpu; nvidia-smi -q -d CLOCK,PERFORMANCE,POWER; } > "$STATE/node.txt" 2>&1
  $EB --version
  echo "source: commit $(cat "$STATE/common/src.commit" 2>/dev/null || echo unknown)"  # the record says what ran
}

bundle_of() {  # wait up to 20 min for a later call to stage JOB's bundle
  local job=$1 t0; t0=$(date +%s)
  while [ ! -f "$STATE/bundles/$job.tar" ]; do
    [ $(( $(date +%s) - t0 )) -gt 1200 ] && { log "no bundle for $job after 1200 s"; return 1; }
    sleep 5
  done
  echo "$STATE/bundles/$job.tar"
}

pin_of() {  # JOB: --bundle-sha256 of a bundle made from a lock of the preparer's own (not shipped):
  # the sha256 `envbuild bundle` printed when it wrote it, carried as .device/JOB/bundle.sha256
  [ -s "$STATE/bundles/$1.sha256" ] && printf -- '--bundle-sha256 %s' "$(cut -c1-64 "$STATE/bundles/$1.sha256")"
}

ok_rc() { [ "$1" = 0 ] || [ "$1" = 5 ]; }

explain_path() {  # PATH for an install: with NINJA_EXPLAIN=1, a ninja that explains comes first
  [ "${NINJA_EXPLAIN:-0}" = 1 ] || { printf '%s' "$PATH"; return; }
  local d=$STATE/explain
  mkdir -p "$d"
  cat > "$d/ninja" <<EOS
#!/bin/sh
# the next ninja on PATH, with -d explain (bench/gpu_session.sh NINJA_EXPLAIN=1)
PATH=\$(printf '%s' "\$PATH" | tr ':' '\\n' | grep -vx '$d' | paste -sd: -)
exec ninja -d explain "\$@"
EOS
  chmod +x "$d/ninja"
  printf '%s:%s' "$d" "$PATH"
}

install_one() {  # JOB RECIPE: provision from the bundle, no smoke; the job's first install is
  # install.jsonl, a later one (the same bundle again: envbuild's no-op) install-2.jsonl, ...
  local job=$1 recipe=$2 bundle rc name=install n=2
  mkdir -p "$STATE/$job"
  if [ -e "$STATE/$job/install.jsonl" ]; then
    while [ -e "$STATE/$job/install-$n.jsonl" ]; do n=$((n + 1)); done
    name=install-$n
  fi
  echo "$recipe" > "$STATE/$job/recipe"
  bundle=$(bundle_of "$job") || { touch "$STATE/$job/failed"; return 1; }
  # shellcheck disable=SC2046 # pin_of: two words or none
  PATH=$(explain_path) $EB provision "$recipe" --target "$TARGET" --hosts local --bundle "$bundle" $(pin_of "$job") --no-smoke --json \
      > "$STATE/$job/$name.jsonl" 2> "$STATE/$job/$name.err"
  rc=$?
  ok_rc $rc || touch "$STATE/$job/failed"
  return $rc
}

tools() {  # unpack the carried py-spy and eu-stack once
  local t=$STATE/tools deb
  [ -d "$t" ] && return 0
  mkdir -p "$t/eu"
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = [m for m in z.namelist() if m.endswith("/scripts/py-spy")][0]; open(sys.argv[2], "wb").write(z.read(n))' \
      "$(find "$STATE/common/tools" -name 'py_spy-*.whl' | head -1)" "$t/py-spy" && chmod +x "$t/py-spy"
  for deb in "$STATE"/common/tools/*.deb; do dpkg-deb -x "$deb" "$t/eu"; done
}

worker_pids() {  # processes matching $STALL_PROC whose parent matches it too
  local pat=${STALL_PROC:-pretrain_gpt} all p
  all=$(pgrep -f "$pat")
  for p in $all; do
    echo "$all" | grep -qx "$(ps -o ppid= -p "$p" | tr -d ' ')" && echo "$p"
  done
}

capture_stall() {  # JOB N: the workers' threads and stacks into $STATE/JOB/stall-N, then SIGABRT
  local d="$STATE/$1/stall-$2" p t pids
  mkdir -p "$d"; tools
  pids=$(worker_pids)
  log "stall in $1: workers ${pids//$'\n'/ }"
  for p in $pids; do
    ( { tr '\0' ' ' < "/proc/$p/cmdline"; echo
        echo "tid comm state wchan utime stime"
        for t in /proc/"$p"/task/*; do
          printf '%s %s %s %s %s\n' "${t##*/}" "$(tr ' ' _ < "$t/comm")" "$(awk '{print $3}' "$t/stat")" \
              "$(cat "$t/wchan" 2>/dev/null)" "$(awk '{print $14, $15}' "$t/stat")"
        done; } > "$d/threads-$p.txt" 2>&1
      LD_LIBRARY_PATH=$STATE/tools/eu/usr/lib/x86_64-linux-gnu timeout 90 "$STATE/tools/eu/usr/bin/eu-stack" -p "$p" \
          > "$d/eu-stack-$p.txt" 2>&1
      timeout 90 "$STATE/tools/py-spy" dump --native --pid "$p" > "$d/py-spy-$p.txt" 2>&1 ) &
  done
  wait
  nvidia-smi > "$d/nvidia-smi.txt" 2>&1; ls -la /dev/shm > "$d/dev-shm.txt" 2>&1
  for p in $pids; do kill -ABRT "$p"; done
}

stall_watch() {  # JOB N NAME SECONDS: capture_stall when the newest NAME stops growing
  local job=$1 n=$2 name=$3 limit=$4 f="" size last=-1 still=0
  while [ ! -e "$STATE/$job/smoke-$n.end" ]; do
    sleep 5
    [ -n "$f" ] || f=$(find "$ENVBUILD_HOME" -xdev -name "$name" -newer "$STATE/$job/smoke-$n.start" 2>/dev/null | head -1)
    [ -n "$f" ] || continue
    size=$(stat -c %s "$f" 2>/dev/null || echo 0)
    if [ "$size" = "$last" ]; then still=$((still + 5)); else still=0; last=$size; fi
    if [ "$still" -ge "$limit" ]; then
      log "$f unchanged for $still s"; capture_stall "$job" "$n"; return
    fi
  done
}

smoke_one() {  # JOB GPUS: the smoke step again on those GPUs
  local job=$1 gpus=$2 recipe rc n watcher=""
  if [ -e "$STATE/$job/failed" ] || [ ! -f "$STATE/$job/recipe" ]; then
    log "$job: skipped (its install or last smoke failed)"; return 200
  fi
  recipe=$(cat "$STATE/$job/recipe")
  n=1; while [ -e "$STATE/$job/smoke-$n.jsonl" ]; do n=$((n + 1)); done
  : > "$STATE/$job/smoke-$n.jsonl"; touch "$STATE/$job/smoke-$n.start"
  case "${STALL:-}" in "$job":*:*)
    local spec=${STALL#*:}; stall_watch "$job" "$n" "${spec%:*}" "${spec##*:}" & watcher=$! ;;
  esac
  # shellcheck disable=SC2046,SC2086 # pin_of: two words or none; $EB: the command's words
  CUDA_VISIBLE_DEVICES=$gpus own_net $EB provision "$recipe" --target "$TARGET" --hosts local \
      --bundle "$STATE/bundles/$job.tar" $(pin_of "$job") --from-step smoke --smoke-preset "$SMOKE" --json \
      > "$STATE/$job/smoke-$n.jsonl" 2> "$STATE/$job/smoke-$n.err"
  rc=$?
  touch "$STATE/$job/smoke-$n.end"; [ -n "$watcher" ] && wait "$watcher"
  clocks "$job-$n"
  # exit 1 is a verdict (FAIL: the run was judged), not a broken job: run 10 lost its planned
  # Megatron-DeepSpeed repeats to this rule while their FAILs were the finding
  ok_rc $rc || [ "$rc" = 1 ] || touch "$STATE/$job/failed"
  printf '%s\t%s\t%s\t%s\n' "$job" "$gpus" "$rc" "$(run_dir "$STATE/$job/smoke-$n.jsonl")" >> "$STATE/runs.tsv"
  return $rc
}

own_net() {  # CMD...: CMD in a network namespace of its own, only its loopback up, so the jobs of
  # a wave never meet on a port: torch's launchers and DeepSpeed's both rendezvous on 127.0.0.1:29500
  # by default, and run 20's Megatron-DeepSpeed benchmark died on it beside alpa's (EADDRINUSE).
  # A smoke needs no other interface (a bundle, --hosts local: Ansible's local connection; NCCL
  # takes lo when nothing else is up). OWN_NET=0, or no unshare here: CMD as it is, said in the log.
  if [ "${OWN_NET:-1}" = 1 ] && unshare --net true 2>/dev/null; then
    unshare --net -- sh -c "$LO_UP"' && exec "$@"' own-net "$@"
  else
    log "own_net: not in a namespace of its own (OWN_NET=${OWN_NET:-1}, unshare --net refused or missing)"
    "$@"
  fi
}
# loopback up in a fresh namespace: ip where it is installed, else the ioctls (SIOCGIFFLAGS,
# SIOCSIFFLAGS with IFF_UP) from python3, which every node of ours has
LO_UP='if command -v ip >/dev/null; then ip link set lo up; else python3 -c "import fcntl, socket, struct
s = socket.socket(); f = struct.unpack(\"16sH14x\", fcntl.ioctl(s, 0x8913, struct.pack(\"16sH14x\", b\"lo\", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack(\"16sH14x\", b\"lo\", f | 1))"; fi'

clocks() {  # TAG: the GPUs' clocks, throttle reasons, temperature and power and the host's load
  # average as a smoke ends (read only: the GPUs' settings are never changed), to $STATE/clocks.tsv
  local q=index,clocks.sm,clocks.max.sm,clocks.mem,clocks_event_reasons.active,temperature.gpu,power.draw
  { nvidia-smi --query-gpu=$q --format=csv,noheader 2>/dev/null \
      || nvidia-smi --query-gpu=${q/event/throttle} --format=csv,noheader; } 2>/dev/null | sed "s/^/$1\t$(date +%T)\t$(cut -d' ' -f1-3 /proc/loadavg)\t/" >> "$STATE/clocks.tsv"
}

run_dir() {
  python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]; r=[x for x in r if x.get("type")=="result"] or r[-1:]; print(r[-1]["run_dir"] if r else "")' "$1" 2>/dev/null
}

wipe_one() {  # JOB: remove the environment of JOB's last install (its plan's prefix), keeping the
  # node's build cache ($ENVBUILD_HOME/cache/wheels): JOB's next install is that of the next node of
  # the kind, which finds what the first built (an Apex wheel, a source's build outputs) in the cache
  local job=$1 dir prefix last
  last=$(find "$STATE/$job" -maxdepth 1 -name 'install*.jsonl' -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2)
  dir=$(run_dir "$last")
  prefix=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prefix"])' "$dir/nodes/local/plan.json" 2>/dev/null)
  case "$prefix" in /?*/*) ;; *) log "$job: no environment to wipe (plan of ${dir:-no install})"; return 1 ;; esac
  rm -rf -- "$prefix" && log "$job: wiped $prefix (the build cache kept)"
}

load_on() {  # GPUS: bench/gpu_load.py on each (LOAD_DUTY of each period busy), until SIGTERM
  local g n; n=$(wc -l < "$STATE/phases.tsv" 2>/dev/null || echo 0)
  for g in ${1//,/ }; do
    CUDA_VISIBLE_DEVICES=$g python3 "$STATE/common/src/bench/gpu_load.py" --duty "${LOAD_DUTY:-0.15}" \
        --record "$STATE/load-line$((n + 1))-gpu$g.json" > /dev/null 2>> "$STATE/load.err" &
    echo $! >> "$STATE/load.pids"
  done
}

line() {  # run one plan line: its items in parallel (JOB=RECIPE installs, JOB@GPUS smokes, load@GPUS
  # a co-located GPU load for as long as the line's other items run), wait for all
  local verb=$1; shift
  local pids=() rcs="" t0 item p
  t0=$(date +%s); rm -f "$STATE/load.pids"
  local sampler ln; ln=$(( $(wc -l < "$STATE/phases.tsv" 2>/dev/null || echo 0) + 1 ))
  ( while sleep 10; do clocks "line$ln"; done ) & sampler=$!
  for item in "$@"; do
    case "$item" in load@*) load_on "${item#load@}"; continue ;; esac
    case "$item" in
      wipe:*) wipe_one "${item#wipe:}" & ;;
      *=*) install_one "${item%%=*}" "${item#*=}" & ;;
      *) smoke_one "${item%%@*}" "${item#*@}" & ;;
    esac
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
  kill "$sampler" 2>/dev/null
  if [ -f "$STATE/load.pids" ]; then  # the load ends with the line; its records say what it did
    # shellcheck disable=SC2046 # one pid a word
    kill $(cat "$STATE/load.pids") 2>/dev/null; sleep 3
  fi
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
  cp "$STATE/phases.tsv" "$STATE/runs.tsv" "$STATE/node.txt" "$STATE/clocks.tsv" "$OUT/" 2>/dev/null
  [ -f "$STATE/session.log" ] && tail -c 2000000 "$STATE/session.log" > "$OUT/session.log"
  local dirs=() d
  while IFS=$'\t' read -r _ _ _ d; do [ -n "$d" ] && [ -d "$d" ] && dirs+=("$d"); done < "$STATE/runs.tsv"
  for d in "$STATE"/*/install.jsonl "$STATE"/*/install-*.jsonl; do [ -f "$d" ] && dirs+=("$(run_dir "$d")"); done
  tar czf "$OUT/runs.tgz" --exclude='ansible/artifacts' --exclude='*.whl' \
      "${dirs[@]}" "$STATE"/*/install*.err "$STATE"/*/smoke-*.err "$STATE"/*/stall-* "$STATE"/load-*.json \
      "$STATE"/load.err 2>/dev/null
  ls -la "$OUT"
}

harvest() {  # what the node's controller build cache holds ($ENVBUILD_HOME/cache/wheels/KEY/: an extension
  # wheel, or outputs.tar, a source's in-tree build outputs), built by this lease's installs, into
  # $OUT/prebuilt: KEY.sha256 (sha256 and the file's name) and the file cut into KEY.part.NN of 15 MiB
  # (gzipped first when it would take over 7 parts; KEY.sha256 is still the file's own).
  # The device returns 8 files of 16 MiB at most a call, those already in $OUT counted: the keys
  # (HARVEST_KEY, words, in its order; else every key of the cache) are taken while their files fit,
  # and those that do not are named for the next call. A key whose file is empty, or over 7 parts
  # gzipped, is named and left; a named key the cache lacks is said. Exit 0 when every key was
  # taken, 1 when one was left or failed. bench/gpu_harvest.py joins them, checks them and seeds the build cache
  # here, so the next bundle carries them (prebuilt) instead of the node building them.
  local cache=$ENVBUILD_HOME/cache/wheels key d art src how n size files took=0 left="" bad=0
  local part=$((15 * 1024 * 1024)) keys
  mkdir -p "$OUT/prebuilt"
  files=$(find "$OUT" -type f | wc -l)
  if [ -n "${HARVEST_KEY:-}" ]; then keys=$HARVEST_KEY
  else keys=$(find "$cache" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort); fi
  for key in $keys; do
    d=$cache/$key
    [ -d "$d" ] || { log "$key: not in the build cache ($cache)"; bad=1; continue; }
    art=$(find "$d" -maxdepth 1 -name '*.whl' | sort | head -1)
    if [ -n "$art" ]; then
      [ ! -f "$d/outputs.tar" ] || log "$key: a wheel and outputs.tar: the wheel, which a bundle packs first"
    elif [ -f "$d/outputs.tar" ]; then art=$d/outputs.tar
    else log "$key: no wheel or outputs.tar in the build cache"; bad=1; continue; fi
    size=$(stat -c %s "$art")
    if [ "$size" -eq 0 ]; then log "$key: $(basename "$art") is empty: not harvested"; bad=1; continue; fi
    src=$art how=""
    n=$(( (size + part - 1) / part ))
    if [ $((n + 1)) -gt 8 ]; then  # a build output's objects: gzipped they fit (run 23: 122 MB, 33 MB gzipped)
      src=$STATE/harvest-$key.gz
      if ! { mkdir -p "$STATE" && gzip -1 -c "$art" > "$src"; }; then
        log "$key: gzip failed"; rm -f "$src"; bad=1; continue
      fi
      n=$(( ($(stat -c %s "$src") + part - 1) / part )); how=", gzipped to $(stat -c %s "$src") bytes"
      if [ $((n + 1)) -gt 8 ]; then
        log "$key: $(basename "$art") is over 105 MiB gzipped, more than one call brings back: not harvested"
        rm -f "$src"; bad=1; continue
      fi
    fi
    if [ $((files + n + 1)) -gt 8 ]; then left="$left $key"; [ "$src" = "$art" ] || rm -f "$src"; continue; fi
    if ! { (cd "$d" && sha256sum "$(basename "$art")") > "$OUT/prebuilt/$key.sha256" \
           && split -b 15M -d -a 2 "$src" "$OUT/prebuilt/$key.part."; }; then
      log "$key: harvest failed"; rm -f "$OUT/prebuilt/$key".*; bad=1
    else
      files=$((files + n + 1)); took=$((took + 1))
      log "harvested $key: $(basename "$art"), $size bytes$how, $n parts"
    fi
    [ "$src" = "$art" ] || rm -f "$src"
  done
  [ -z "$left" ] || log "not in this call (8 files at most): harvest again with HARVEST_KEY='${left# }'"
  [ "$took" -gt 0 ] || [ "$bad" -eq 1 ] || [ -n "$left" ] || log "nothing to harvest in $cache"
  [ "$took" -gt 0 ] && [ "$bad" -eq 0 ] && [ -z "$left" ]
}

case "${1:-}" in
  stage)
    mkdir -p "$STATE/bundles"
    [ -d "$STATE/common" ] || cp -r "$DEV/common" "$STATE/common" || exit 1
    if [ -f "$DEV/common/src.commit" ] && ! cmp -s "$DEV/common/src.commit" "$STATE/common/src.commit"; then
      # prepared again at another commit while this machine keeps the first one's source: the
      # session would run that one, not the commit this call names
      echo "error: this machine's source is commit $(cat "$STATE/common/src.commit" 2>/dev/null || echo unknown)," \
           "this call carries $(cat "$DEV/common/src.commit"): start again on a fresh machine" >&2
      exit 1
    fi
    set -o pipefail  # a copy below whose first command fails is not a source
    if [ ! -d "$STATE/common/src" ] && [ -f "$STATE/common/src.tar.gz" ]; then  # the export, carried packed
      rm -rf "$STATE/common/src.part" && mkdir "$STATE/common/src.part" || exit 1
      tar -xzf "$STATE/common/src.tar.gz" -C "$STATE/common/src.part" || exit 1
      mv "$STATE/common/src.part" "$STATE/common/src" || exit 1
    fi
    if [ ! -d "$STATE/common/src" ] && [ -f "$STATE/common/src.commit" ]; then
      # the working tree this call carried, the commit prepare named (a clean tree; on the device,
      # without .git, all of it but .device/; with .git, the files git tracks)
      tree=$(dirname "$DEV")
      rm -rf "$STATE/common/src.part" && mkdir "$STATE/common/src.part" || exit 1
      if [ -d "$tree/.git" ]; then
        git -C "$tree" ls-files -z | tar -C "$tree" --null -T - -cf - | tar -xf - -C "$STATE/common/src.part" || exit 1
      else
        tar -C "$tree" --exclude=./.device -cf - . | tar -xf - -C "$STATE/common/src.part" || exit 1
      fi
      mv "$STATE/common/src.part" "$STATE/common/src" || exit 1
      log "source: the carried working tree, commit $(cat "$STATE/common/src.commit" 2>/dev/null || echo unknown)"
    fi
    for d in "$DEV"/*/; do
      j=$(basename "$d")
      if [ -f "$d/bundle.sha256" ]; then
        # a bundle carried anew (a re-prepared job on a warm node): the one staged before is not it
        if [ -f "$STATE/bundles/$j.tar" ] && ! cmp -s "$d/bundle.sha256" "$STATE/bundles/$j.sha256"; then
          rm -f "$STATE/bundles/$j.tar" && log "$j: a new bundle was carried; the one staged before is dropped"
        fi
        cp "$d/bundle.sha256" "$STATE/bundles/$j.sha256"
      fi
      [ -f "$d/bundle.tar" ] && [ ! -f "$STATE/bundles/$j.tar" ] && cp "$d/bundle.tar" "$STATE/bundles/$j.tar.part" \
          && mv "$STATE/bundles/$j.tar.part" "$STATE/bundles/$j.tar" && log "staged $j"
      # a bundle carried in parts (bench/gpu_carry.py parts): JOB/ has part 00 and the count, JOB+NN/ part NN
      for part in "$d"bundle.part.*; do
        [ -f "$part" ] || continue
        mkdir -p "$STATE/parts/${j%%+*}" && cp "$part" "$STATE/parts/${j%%+*}/" || exit 1
      done
      [ -f "$d/bundle.parts" ] && mkdir -p "$STATE/parts/$j" && cp "$d/bundle.parts" "$STATE/parts/$j/count"
    done
    for p in "$STATE"/parts/*/count; do
      [ -f "$p" ] || continue
      pd=$(dirname "$p"); j=$(basename "$pd")
      [ -f "$STATE/bundles/$j.tar" ] && continue
      # parts 00 .. count-1 by name: parts left by an earlier cut with more parts are never joined
      n=$(cat "$p"); names=()
      for ((i = 0; i < n; i++)); do names+=("$pd/$(printf 'bundle.part.%02d' "$i")"); done
      have=0; for f in "${names[@]}"; do [ -f "$f" ] && have=$((have + 1)); done
      if [ "$have" -eq "$n" ]; then
        cat "${names[@]}" > "$STATE/bundles/$j.tar.part" || exit 1
        # the parts of an earlier cut may be among them: the joined bundle must be the one whose
        # sha256 was taken before this cut, else it waits for the right parts (each call copies its own)
        if [ "$(sha256sum "$STATE/bundles/$j.tar.part" | cut -c1-64)" = "$(cat "$STATE/bundles/$j.sha256" 2>/dev/null)" ]; then
          mv "$STATE/bundles/$j.tar.part" "$STATE/bundles/$j.tar" && rm -f "$pd"/bundle.part.* \
            && log "staged $j (joined from $(cat "$p") parts)"
        else
          rm -f "$STATE/bundles/$j.tar.part"; log "$j: its $(cat "$p") parts do not join to its sha256 yet"
        fi
      fi
    done; true ;;
  start)
    [ -f "$STATE/started" ] && { echo "session already started"; exit 0; }
    cp "${2:?plan file}" "$STATE/plan" && date +%s > "$STATE/started"
    ( cd "$STATE/common/src" && setsid nohup bash "$STATE/common/src/bench/gpu_session.sh" session "$STATE/plan" \
        > "$STATE/session.log" 2>&1 < /dev/null & )
    sleep 2; echo "session started" ;;
  wait)
    # a machine without the session's start mark is a fresh one: the lease was lost with everything
    # on it (run 18: a wait polled an empty machine for 560 s of device time); say so at once
    [ -f "$STATE/started" ] || { echo "no session on this machine ($STATE/started is missing): it is a fresh" \
      "one, the last was lost with everything on it; write a plan of the lines not yet run, prepare it," \
      "and start again from call 1"; exit 3; }
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
  harvest) harvest ;;
  own-net) shift; own_net "$@" ;;  # CMD...: what a smoke of a wave runs in (tests/testbed/test_gpu_session_net.py)
  *) echo "usage: $0 stage | start PLANFILE | wait SECONDS | harvest | session PLANFILE | own-net CMD..." >&2; exit 2 ;;
esac
