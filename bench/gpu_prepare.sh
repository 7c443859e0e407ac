#!/usr/bin/env bash
# Prepare everything bench/gpu_session.sh reads for PLAN, on a machine with the network, from the
# repository root (what it makes is under .device/, which git ignores):
#
#   bash bench/gpu_prepare.sh PLAN MIRROR_DIR [FACTS]
#
#   .device/JOB/bundle.tar, .device/JOB/bundle.sha256   each JOB=RECIPE of the plan: envbuild bundle
#                                         of RECIPE for $TARGET (default h100-venv), planned for
#                                         FACTS' nodes when given (a recipe whose benchmark needs
#                                         more GPUs than the target profile's, e.g. the facts.json
#                                         of a run on such a node), its git sources from MIRROR_DIR
#                                         (OWNER/NAME, OWNER/NAME.git or OWNER+NAME); the sha256 is
#                                         what the node pins it by (provision --bundle-sha256); a
#                                         bundle too big for one call with the working tree travels in
#                                         parts: .device/JOB/bundle.part.00 (with bundle.parts, their
#                                         count) and .device/JOB+NN/bundle.part.NN, joined by `stage`
#   .device/common/whl                    envbuild's own dependencies as cp312 wheels
#   .device/common/src.commit             the commit the device runs: no export travels, every call
#                                         carries the working tree already (36 MiB and more), and stage
#                                         copies it (without .device/) as the session's source; so the
#                                         tree must be that commit, clean (exit 1 otherwise)
#   .device/common/tools                  the stall tools (a py-spy wheel, elfutils' .debs) for
#                                         STALL=...; offline, a note and none
#   .device/plan.txt                      PLAN, as `start` reads it
#
# then prints the carry split (bench/gpu_carry.py: which paths each device call carries so that
# each, with the working tree, stays within 64 MiB) and each call's commands. The steps are
# bench/prepare_lib.sh's, shared with bench/h100_offline_prepare.sh. SKIP_WHEELS=1 and
# SKIP_TOOLS=1 leave the downloads out (a rehearsal), BUNDLE_ARGS (words) go to envbuild bundle,
# CARRY_LIMIT_MIB (default 58) is what one call may carry: the device's limit is 64 MiB, but its
# count is larger than gpu_carry.py's apparent sizes (run 18: a call of 61.9 MiB by ours was refused
# as over 64 MiB), so the default keeps a margin.
# Exit codes: 0 prepared and split; 1 a step failed, or something cannot be carried (named);
# 2 bad input (usage, a plan line: file and line named).
set -euo pipefail
PLAN=${1:-}; MIRROR=${2:-}; FACTS=${3:-}
if [ -z "$PLAN" ] || [ -z "$MIRROR" ]; then
  echo "usage: $0 PLAN MIRROR_DIR [FACTS]" >&2; exit 2
fi
[ -f "$PLAN" ] || { echo "error: $PLAN: no such plan file" >&2; exit 2; }
[ -d "$MIRROR" ] || { echo "error: $MIRROR: no such folder of git mirrors" >&2; exit 2; }
[ -z "$FACTS" ] || [ -f "$FACTS" ] || { echo "error: $FACTS: no such facts file" >&2; exit 2; }
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ] || [ ! -f bench/gpu_session.sh ]; then
  echo "error: run from the repository root" >&2; exit 2
fi
TARGET=${TARGET:-h100-venv}
HERE=$(dirname "$0")
# shellcheck source=bench/prepare_lib.sh
. "$HERE/prepare_lib.sh"

job_list=$("$PY" "$HERE/gpu_carry.py" jobs "$PLAN") || exit 2
if [ -n "$(git status --porcelain --untracked-files=normal)" ]; then
  # the device copies the working tree, untracked files too, and runs it: it must be the commit
  echo "error: the working tree is not HEAD ($(git rev-parse --short HEAD)): the device runs the tree it is" \
       "carried, so commit (or remove) first:" >&2
  git status --short --untracked-files=normal | head -5 >&2
  exit 1
fi
rm -rf .device/common && mkdir -p .device/common  # only what gpu_session.sh reads: each byte is carried
while read -r job recipe; do
  echo "=== bundle $job: $recipe for $TARGET${FACTS:+ with $FACTS}"
  rm -rf ".device/$job"
  prep_bundle "$recipe" "$TARGET" "$MIRROR" ".device/$job/bundle.tar" "$FACTS"
  rm -rf ".device/$job+"*
  "$PY" "$HERE/gpu_carry.py" parts "$job" --limit-mib "${CARRY_LIMIT_MIB:-58}" || exit 1
done <<< "$job_list"
echo "=== envbuild's wheels, the commit $(git rev-parse --short HEAD), the stall tools"
prep_wheels .device/common
git rev-parse HEAD > .device/common/src.commit
prep_tools .device/common
cp "$PLAN" .device/plan.txt
du -sh .device/*
"$PY" "$HERE/gpu_carry.py" split --limit-mib "${CARRY_LIMIT_MIB:-58}" --plan-path .device/plan.txt
