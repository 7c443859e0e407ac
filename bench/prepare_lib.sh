# shellcheck shell=bash
# What bench/gpu_prepare.sh and bench/h100_offline_prepare.sh make for an offline GPU node, on a
# machine with the network, from the repository root (sourced by both; one implementation).
# $PY is the python that runs envbuild (default: python).
#   prep_bundle RECIPE TARGET MIRROR BUNDLE [FACTS]   envbuild bundle of RECIPE, and BUNDLE's
#                                 sha256 beside it (BUNDLE without .tar, plus .sha256): the node
#                                 pins the file by it (provision --bundle-sha256) as the bundle was
#                                 made from this machine's lock, not a shipped one; $BUNDLE_ARGS
#                                 (words) go to envbuild bundle too (e.g. --wheelhouse DIR);
#                                 BUNDLE_GZIP=1 packs it gzipped under the same name (a build
#                                 output's objects: a third of the bytes to carry; the node's
#                                 provision --bundle reads either)
#   prep_wheels DEST              envbuild's own dependencies (their list in DEST/ebdeps.txt, from
#                                 $PY's installed versions) as cp312 wheels in DEST/whl (the
#                                 node's python is 3.12; uv is left out: nothing locks there)
#   prep_src DEST                 a clean export of this commit in DEST/src (what runs there:
#                                 the whole commit, playbooks/ included)
#   prep_src_tgz DEST             the same export as DEST/src.tar.gz (a fifth of the bytes to
#                                 carry; bench/gpu_session.sh's stage unpacks it)
#   prep_gitdeb DEST              a Debian git .deb as DEST/git.deb (for a node without git)
#   prep_tools DEST               the stall tools in DEST/tools: a py-spy manylinux wheel and
#                                 Debian's elfutils .debs (eu-stack); offline, a note and no tools
# SKIP_WHEELS=1 and SKIP_TOOLS=1 leave out the downloads (a rehearsal without the network).
PY=${PY:-python}

prep_bundle() {
  local recipe=$1 target=$2 mirror=$3 bundle=$4 facts=${5:-}
  mkdir -p "$(dirname "$bundle")"
  local out=$bundle
  if [ "${BUNDLE_GZIP:-0}" = 1 ]; then
    case " ${BUNDLE_ARGS:-} " in  # its signature would name the .tar.gz, not the file renamed
      *" --sign-key "*) echo "error: BUNDLE_GZIP=1 with --sign-key in BUNDLE_ARGS: sign an ungzipped bundle" >&2
                        return 1;;
    esac
    out=${bundle%.tar}.tar.gz
  fi
  # shellcheck disable=SC2086 # BUNDLE_ARGS: words
  "$PY" -m envbuild bundle "$recipe" --target "$target" ${facts:+--facts "$facts"} --git-mirror "$mirror" \
      ${BUNDLE_ARGS:-} -o "$out" || return 1
  [ "$out" = "$bundle" ] || mv "$out" "$bundle" || return 1
  sha256sum "$bundle" | cut -c1-64 > "${bundle%.tar}.sha256"
}

prep_wheels() {
  local dest=$1
  rm -rf "$dest/whl" && mkdir -p "$dest/whl"  # one wheel per package: a stale one conflicts
  "$PY" - > "$dest/ebdeps.txt" <<'PY' || return 1
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
  if [ "${SKIP_WHEELS:-0}" = 1 ]; then
    echo "note: SKIP_WHEELS=1: $dest/ebdeps.txt lists the wheels, $dest/whl has none (the node cannot install envbuild without them)" >&2
    return 0
  fi
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_39_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
      --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$dest/whl" -r "$dest/ebdeps.txt"
}

prep_src() {
  local dest=$1
  rm -rf "$dest/src" && mkdir -p "$dest/src" && git archive HEAD | tar -x -C "$dest/src"
}

prep_src_tgz() {
  local dest=$1
  rm -rf "$dest/src" "$dest/src.tar.gz" && mkdir -p "$dest" \
      && git archive --format=tar.gz -o "$dest/src.tar.gz" HEAD
}

prep_gitdeb() {
  local dest=$1
  (cd "$dest" && apt-get download git >/dev/null && mv git_*.deb git.deb)
}

prep_tools() {
  local dest=$1
  rm -rf "$dest/tools" && mkdir -p "$dest/tools"
  if [ "${SKIP_TOOLS:-0}" = 1 ]; then
    echo "note: SKIP_TOOLS=1: no stall tools; a STALL capture records the threads from /proc only" >&2
    return 0
  fi
  if ! "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dest/tools" py-spy \
      || ! (cd "$dest/tools" && apt-get download elfutils libasm1 libdw1 libelf1 >/dev/null 2>&1); then
    rm -rf "${dest:?}/tools" && mkdir -p "$dest/tools"
    echo "note: the stall tools could not be downloaded (offline?): $dest/tools is empty; a STALL capture" \
         "records the threads from /proc only (no eu-stack or py-spy stacks)" >&2
  fi
  return 0
}
