"""envbuild observe: print what is really installed in one environment, as JSON.

Runs ON THE NODE with the environment's own python (the package's floor or newer:
``envbuild/node/__init__.py``), standard library only. envbuild sends it over SSH with the rest
of its package (``envbuild.observe.observe_command``); it imports nothing of envbuild.

Usage::

    PYTHON observe.py --prefix /opt/env [--source NAME=DIR ...] [--env-file FILE]
                      [--all-so]

Output: one JSON document, schema "envbuild.observed/1" (see envbuild.observe.model).
"""

import glob
import hashlib
import json
import os
import re
import subprocess
import sys
from importlib import metadata

SCHEMA = "envbuild.observed/1"
PROCESS_ENV_RE = re.compile(r"^(NCCL_|CUDA_|UCX_|NVIDIA_|TORCH_CUDA_ARCH_LIST$|CUDNN_)")


def parse_args(argv):
    args = {"prefix": None, "sources": {}, "env_file": None, "all_so": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--prefix":
            args["prefix"] = argv[i + 1]
            i += 2
        elif a == "--source":
            name, _, path = argv[i + 1].partition("=")
            args["sources"][name] = path
            i += 2
        elif a == "--env-file":
            args["env_file"] = argv[i + 1]
            i += 2
        elif a == "--all-so":
            args["all_so"] = True
            i += 1
        else:
            raise SystemExit("observe: unknown argument %r" % a)
    if not args["prefix"]:
        args["prefix"] = sys.prefix
    if not args["env_file"]:
        args["env_file"] = os.path.join(args["prefix"], ".envbuild", "env.sh")
    return args


def canonical(name):
    """A distribution's name in PEP 503's normal form: the node package's one normaliser (the
    controller's is envbuild.names; verify_image.py, copied alone into images, keeps its own)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages():
    """{canonical name: version} of every distribution the interpreter sees."""
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def read_git_head(path):
    """The full SHA checked out in ``path`` (git if present, else .git files), or None."""
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
        if out.returncode == 0 and re.match(r"^[0-9a-f]{40}$", out.stdout.strip()):
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    gitdir = os.path.join(path, ".git")
    try:
        with open(os.path.join(gitdir, "HEAD")) as fh:
            head = fh.read().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        ref_file = os.path.join(gitdir, ref)
        if os.path.exists(ref_file):
            with open(ref_file) as fh:
                return fh.read().strip()
        with open(os.path.join(gitdir, "packed-refs")) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        return None
    return None


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def site_packages():
    import sysconfig

    dirs = []
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p and os.path.isdir(p) and p not in dirs:
            dirs.append(p)
    return dirs


def extensions(sources, all_so):
    """sha256 of built extensions: .so at the top of site-packages and anywhere in source trees.

    Wheels from an index are covered by their version pins; what a node compiles itself
    (Apex's amp_C, Megatron's fused kernels) lands at the top of site-packages or in the tree.
    ``all_so`` hashes every .so under site-packages too (slow with torch).
    """
    paths = set()
    for sp in site_packages():
        pattern = os.path.join(sp, "**", "*.so") if all_so else os.path.join(sp, "*.so")
        paths.update(glob.glob(pattern, recursive=True))
    for path in sources.values():
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d != ".git"]
            paths.update(os.path.join(root, f) for f in files if f.endswith(".so") or ".so." in f)
    out = []
    for p in sorted(paths):
        if os.path.isfile(p):
            out.append({"path": p, "sha256": sha256_file(p)})
    return out


def patch_still_applied(diff_path, tree):
    """True if the diff is present in ``tree`` (its reverse applies), None if unknown.

    A diff's context lines may be another patch's lines: two patches a line apart in one file
    (megatronapp-h100's te-absent-stand-in and packaging-not-pkg-resources) leave the first
    one's recorded context changed by the second. So a diff whose reverse does not apply with
    its context is checked again on its own changed lines alone (``-C0``): those must all be
    there; a patch whose lines are gone is still reverted."""
    try:
        for extra in ([], ["-C0"]):
            out = subprocess.run(["git", "-C", tree, "apply", "--reverse", "--check", *extra, diff_path],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
            if out.returncode == 0:
                return True
        return False
    except (OSError, subprocess.SubprocessError):
        return None


def patches(prefix, sources):
    """Patches recorded under PREFIX/.envbuild/patches/<id>.diff (+ optional <id>.json)."""
    out = []
    folder = os.path.join(prefix, ".envbuild", "patches")
    for diff_path in sorted(glob.glob(os.path.join(folder, "*.diff"))):
        pid = os.path.basename(diff_path)[: -len(".diff")]
        meta = {}
        side = os.path.join(folder, pid + ".json")
        if os.path.exists(side):
            with open(side, encoding="utf-8") as fh:
                meta = json.load(fh)
        with open(diff_path, encoding="utf-8", errors="replace") as fh:
            diff = fh.read()
        component = meta.get("component")
        status = "recorded"
        if diff.strip():
            trees = [component] if component in sources else sorted(sources)
            checks = [(name, patch_still_applied(diff_path, sources[name])) for name in trees]
            applied = [name for name, ok in checks if ok]
            if applied:
                component, status = applied[0], "applied"
            elif any(ok is False for _, ok in checks):
                status = "reverted"
        else:
            status = meta.get("status", "already-applied")
        out.append({"id": pid, "component": component, "status": status, "diff": diff,
                    "reason": meta.get("reason", meta.get("why", ""))})
    return out


def env_file_vars(path):
    """VAR=value pairs of a POSIX environment file (``export`` and quotes handled)."""
    import shlex

    found = {}
    if not os.path.exists(path):
        return found
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("export "):
                line = line[len("export "):].strip()
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
            if not m:
                continue
            try:
                parts = shlex.split(m.group(2))
                value = parts[0] if parts else ""
            except ValueError:
                value = m.group(2)
            found[m.group(1)] = value
    return found


def observe(args):
    prefix = args["prefix"]
    return {
        "schema": SCHEMA,
        "host": os.uname()[1],
        "prefix": prefix,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "python_path": sys.executable,
        "packages": dict(sorted(installed_packages().items())),
        "git": {name: read_git_head(path) for name, path in sorted(args["sources"].items())},
        "patches": patches(prefix, args["sources"]),
        "extensions": extensions(args["sources"], args["all_so"]),
        "env": env_file_vars(args["env_file"]),
        "env_file": args["env_file"] if os.path.exists(args["env_file"]) else None,
        "process_env": {k: v for k, v in sorted(os.environ.items()) if PROCESS_ENV_RE.match(k)},
    }


def main(argv):
    json.dump(observe(parse_args(argv)), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
