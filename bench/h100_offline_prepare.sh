#!/usr/bin/env bash
# Prepare DEST (default .device/) for bench/h100_offline.sh on a machine with network (run from
# the repo root): the bundle of RECIPE (default h100-megatron-deepspeed) for TARGET (default
# h100-venv) at BUNDLE (default DEST/h100.tar), envbuild's own Python dependencies as cp312 wheels
# (the node's python is 3.12; uv is left out: locking is not done there), a Debian git .deb (used
# only if the node has no git), and a clean export of this commit's envbuild (what runs there).
#   bash bench/h100_offline_prepare.sh /path/to/git-mirrors
#   RECIPE=alpa-megatron-h100 DEST=.device/alpa BUNDLE=.device/alpa/bundle.tar bash bench/h100_offline_prepare.sh /path/to/git-mirrors
# FACTS=FILE plans the bundle for those nodes' facts instead of the target profile's (a recipe
# whose benchmark needs more GPUs than the profile's one, e.g. megatron-deepspeed-slurm-h100 with
# FACTS=docs/results/h200x2-run6/facts.json, the facts of a 2-GPU node of this image)
set -euo pipefail
MIRROR=${1:?usage: $0 GIT_MIRROR_DIR}
RECIPE=${RECIPE:-h100-megatron-deepspeed}
TARGET=${TARGET:-h100-venv}
DEST=${DEST:-.device}
BUNDLE=${BUNDLE:-$DEST/h100.tar}
rm -rf "$DEST/whl" && mkdir -p "$DEST/whl"  # one wheel per package: a stale one conflicts
if [ "${SKIP_BUNDLE:-0}" != 1 ]; then
  python -m envbuild bundle "$RECIPE" --target "$TARGET" ${FACTS:+--facts "$FACTS"} --git-mirror "$MIRROR" -o "$BUNDLE"
  # made from this machine's own lock (not a shipped one): the node pins the file by this sha256
  # (provision --bundle-sha256; bench/gpu_session.sh reads it from DEST/bundle.sha256)
  sha256sum "$BUNDLE" | cut -c1-64 > "${BUNDLE%.tar}.sha256"
fi
python - > "$DEST/ebdeps.txt" <<'PY'
import importlib.metadata as md, re
from packaging.requirements import Requirement
seen = {}
def walk(name):
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        return
    seen[key] = d.version
    for r in d.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            walk(req.name)
for root in ("ansible-core", "ansible-runner", "fabric", "packaging", "pyyaml", "rich", "requests", "pydantic", "click", "google-re2"):
    walk(root)
print("\n".join(f"{k}=={v}" for k, v in sorted(seen.items())))
PY
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_39_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST/whl" -r "$DEST/ebdeps.txt"
(cd "$DEST" && apt-get download git >/dev/null && mv git_*.deb git.deb)
rm -rf "$DEST/src" && mkdir -p "$DEST/src" && git archive HEAD | tar -x -C "$DEST/src"
du -sh "$DEST"
