#!/usr/bin/env bash
# Prepare DEST (default .device/) for bench/h100_offline.sh, the one-recipe pipeline of
# docs/results/h100-offline.md (for the several-recipe sessions of bench/gpu_session.sh, use
# bench/gpu_prepare.sh, which makes the layout that script reads). On a machine with network,
# from the repo root: the bundle of RECIPE (default h100-megatron-deepspeed) for TARGET (default
# h100-venv) at BUNDLE (default DEST/h100.tar) with its sha256 beside it, envbuild's own Python
# dependencies as cp312 wheels, a Debian git .deb (used only if the node has no git), and a clean
# export of this commit's envbuild (what runs there). The steps are bench/prepare_lib.sh's.
#   bash bench/h100_offline_prepare.sh /path/to/git-mirrors
#   RECIPE=alpa-megatron-h100 DEST=.device/alpa BUNDLE=.device/alpa/bundle.tar bash bench/h100_offline_prepare.sh /path/to/git-mirrors
# FACTS=FILE plans the bundle for those nodes' facts instead of the target profile's (a recipe
# whose benchmark needs more GPUs than the profile's one, e.g. megatron-deepspeed-slurm-h100 with
# FACTS=docs/results/h200x2-run6/facts.json, the facts of a 2-GPU node of this image).
# SKIP_BUNDLE=1 makes everything but the bundle; SKIP_WHEELS=1 leaves the wheels out.
set -euo pipefail
MIRROR=${1:?usage: $0 GIT_MIRROR_DIR}
RECIPE=${RECIPE:-h100-megatron-deepspeed}
TARGET=${TARGET:-h100-venv}
DEST=${DEST:-.device}
BUNDLE=${BUNDLE:-$DEST/h100.tar}
# shellcheck source=bench/prepare_lib.sh
. "$(dirname "$0")/prepare_lib.sh"
mkdir -p "$DEST"
prep_wheels "$DEST"
[ "${SKIP_BUNDLE:-0}" = 1 ] || prep_bundle "$RECIPE" "$TARGET" "$MIRROR" "$BUNDLE" "${FACTS:-}"
prep_gitdeb "$DEST"
prep_src "$DEST"
du -sh "$DEST"
