"""Python facts: interpreters on the node and the packages of the selected one.

The interpreters come from PATH (python, python3, python3.X), /usr/bin, /usr/local/bin,
/opt/*/bin, /opt/*/.venv/bin and pyenv's versions folder (shims are skipped: they fail
outside an interactive shell). ``$__eb_py``, chosen by the script preamble (``--python`` or
the first python3/python on PATH), is the one whose ``pip list`` is recorded.
"""

from __future__ import annotations

import json
import re
import shlex

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild.facts.model import Interpreter
from envbuild.facts.probe import Probe

_VERSION_SNIPPET = (
    "import sys; v = sys.version_info; print('%d.%d.%d\\t%s' % (v[0], v[1], v[2], sys.prefix))"
)

# One interpreter lists them all (fed the candidate paths on stdin): a venv's version and
# prefix come from its pyvenv.cfg, the lister's own from itself, a CPython install's from its
# include/pythonX.Y/patchlevel.h, and any other distinct binary (realpath) is started once; each
# candidate prints ``path<TAB>X.Y.Z<TAB>sys.prefix`` as if it had been started (the shell loop
# below, which starts each candidate, is the fallback when no python can list). Python 3.2+.
_LISTER = r"""
import glob, os, re, subprocess, sys
NAME = re.compile(r"python([23](\.[0-9]{1,2})?)?$")
SNIPPET = "import sys; v = sys.version_info; print('%d.%d.%d\\t%s' % (v[0], v[1], v[2], sys.prefix))"
me = os.path.realpath(sys.executable)
known = {me: "%d.%d.%d\t%s" % (sys.version_info[:3] + (sys.base_prefix,))}
def venv(p):
    for d in (os.path.dirname(p), os.path.dirname(os.path.dirname(p))):
        cfg = os.path.join(d, "pyvenv.cfg")
        if os.path.isfile(cfg):
            with open(cfg) as fh:
                for line in fh:
                    k, _, v = line.partition("=")
                    m = re.match(r"\s*(\d+\.\d+\.\d+)", v)
                    if k.strip() in ("version", "version_info") and m:
                        return "%s\t%s" % (m.group(1), d)
            return None
    return None
def header(real):
    # a CPython install's own patchlevel.h names its exact version: no need to start it
    m = re.match(r"python(\d+\.\d+)$", os.path.basename(real))
    prefix = os.path.dirname(os.path.dirname(real))
    if not m or os.path.isfile(os.path.join(os.path.dirname(real), "pyvenv.cfg")):
        return None
    for inc in (m.group(1), m.group(1) + "m"):
        try:
            with open(os.path.join(prefix, "include", "python" + inc, "patchlevel.h")) as fh:
                v = re.search(r'#define\s+PY_VERSION\s+"(\d+\.\d+\.\d+)', fh.read())
        except (IOError, OSError):
            continue
        if v:
            return "%s\t%s" % (v.group(1), prefix)
    return None
def started(real):
    try:
        out = subprocess.run([real, "-c", SNIPPET], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, timeout=30).stdout.decode().strip()
    except Exception:
        return None
    return out if re.match(r"\d+\.\d+\.\d+\t", out) else None
def paths(text):
    for word in text.split():  # as the shell's $(...) splits and expands them
        if any(c in word for c in "*?["):
            for p in sorted(glob.glob(word)) or [word]:
                yield p
        else:
            yield word
for p in paths(sys.stdin.read()):
    if not p or "/shims/" in p or not NAME.match(os.path.basename(p)):
        continue
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        continue
    line = venv(p)
    if line is None:
        real = os.path.realpath(p)
        if real not in known:
            known[real] = header(real) or started(real)
        line = known[real]
    if line:
        print("%s\t%s" % (p, line))
"""

_CANDIDATES = (
    "__eb_cands() {\n"
    "  __eb_ifs=$IFS; IFS=:\n"
    "  for d in $PATH; do for n in python python3 python3.[0-9] python3.[0-9][0-9]; do echo \"$d/$n\"; done; done\n"
    "  IFS=$__eb_ifs\n"
    "  for p in /usr/bin/python3* /usr/local/bin/python3* /opt/*/bin/python3 /opt/*/.venv/bin/python3 "
    "\"$HOME\"/.pyenv/versions/*/bin/python; do echo \"$p\"; done\n"
    "}\n"
)
# every candidate started (the fallback when no python can run the lister)
STARTED = (
    "for p in $(__eb_cands); do\n"
    "  case \"$p\" in */shims/*) continue;; esac\n"
    "  case \"${p##*/}\" in python|python[23]|python[23].[0-9]|python[23].[0-9][0-9]) ;; *) continue;; esac\n"
    "  [ -f \"$p\" ] && [ -x \"$p\" ] || continue\n"
    f"  v=$(__eb_to \"$p\" -c \"{_VERSION_SNIPPET}\" 2>/dev/null) || continue\n"
    "  printf '%s\\t%s\\n' \"$p\" \"$v\"\n"
    "done"
)
LISTED = f"if [ -n \"$__eb_py\" ] && __eb_cands | __eb_to \"$__eb_py\" -c {shlex.quote(_LISTER)} 2>/dev/null; then exit 0; fi\n"

# What ``pip list --format=json`` prints, read with importlib.metadata (Python 3.8+) as pip's own
# backend reads it: the first distribution of each name on sys.path, less pip's stdlib_pkgs, the
# working folder taken off sys.path as ``python -m pip`` takes it (pip's __main__), before any
# module is imported from a path (a json.py in the node user's home is not the one). It takes
# 0.05-0.09 CPU-s where pip list took 0.20-0.26 (its own imports; 10 runs each on the 2-core
# machine, the suite running beside), and it needs no pip in
# the interpreter; an older Python (no importlib.metadata) runs pip list as before. Versions come
# as written and ``parse_pip_list`` normalizes them as pip prints them. Where one folder holds two
# copies of a distribution (an upgrade cut short), this takes the first the folder lists; pip
# before Python 3.11 (pkg_resources) took the highest version.
_DISTRIBUTIONS = r"""
import os, sys
if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.pop(0)
import json, re
try:
    from importlib import metadata
except ImportError:
    sys.exit(3)
rows, seen = [], set()
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    key = re.sub(r"[-_.]+", "-", name or "").lower()
    if not name or not dist.version or key in seen or key in ("python", "wsgiref", "argparse"):
        continue
    seen.add(key)
    rows.append({"name": name, "version": dist.version})
print(json.dumps(sorted(rows, key=lambda r: r["name"].lower())))
"""

PROBES = [
    Probe("pythons", _CANDIDATES + LISTED + STARTED),
    Probe("python_selected", '[ -n "$__eb_py" ] || exit 127\necho "$__eb_py"'),
    Probe(
        "pip_list",
        '[ -n "$__eb_py" ] || exit 127\n'
        f'__eb_to "$__eb_py" -c {shlex.quote(_DISTRIBUTIONS)} 2>/dev/null'
        ' || __eb_to "$__eb_py" -m pip list --format=json --disable-pip-version-check 2>/dev/null'
        ' || __eb_to "$__eb_py" -m pip list --disable-pip-version-check',
    ),
]


def parse_pythons(text: str) -> list[Interpreter]:
    """Lines ``path<TAB>X.Y.Z<TAB>sys.prefix``; one interpreter per (version, prefix), first path wins."""
    seen, out = set(), []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not re.match(r"\d+\.\d+\.\d+$", parts[1].strip()):
            continue
        key = (parts[1].strip(), parts[2].strip() if len(parts) > 2 else parts[0])
        if key in seen:
            continue
        seen.add(key)
        out.append(Interpreter(path=parts[0].strip(), version=parts[1].strip()))
    return out


def _is_version(text: str) -> bool:
    try:
        Version(text)
        return True
    except InvalidVersion:
        return False


_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


def _normal(version: str) -> str:
    """A version as pip prints it (normalized: ``1.0.0-RC1`` -> ``1.0.0rc1``), as given where it
    is not a valid version: the probe's importlib.metadata list gives versions as written."""
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def parse_pip_list(text: str) -> dict[str, str]:
    """``pip list --format=json`` or the text table -> {canonical name: version}, sorted.

    In the table, rows are "name version [editable location]"; the header, the dashes and any
    other line (e.g. a trailing "pip 24.0 from ...") are ignored.
    """
    stripped = text.strip()
    pkgs: dict[str, str] = {}
    if stripped.startswith("["):
        try:
            for row in json.loads(stripped):
                pkgs[canonicalize_name(row["name"])] = _normal(str(row["version"]))
            return dict(sorted(pkgs.items()))
        except (ValueError, KeyError, TypeError):
            pkgs = {}
    for line in text.splitlines():
        tokens = line.split()
        if len(tokens) not in (2, 3) or not _NAME.match(tokens[0]) or not _is_version(tokens[1]):
            continue
        if len(tokens) == 3 and not tokens[2].startswith("/"):
            continue
        if tokens[0] == "Package" and tokens[1] == "Version":
            continue
        pkgs[canonicalize_name(tokens[0])] = _normal(tokens[1])
    return dict(sorted(pkgs.items()))


# The oldest target Python the controller's ansible-core (2.19) runs modules with
# (https://docs.ansible.com/ansible/latest/reference_appendices/release_and_maintenance.html).
ANSIBLE_TARGET_PYTHON = (3, 8)
_SYSTEM_DIRS = ("/usr/bin/", "/bin/", "/usr/local/bin/")


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def ansible_python(pythons: list[Interpreter], wanted: str | None = None) -> Interpreter | None:
    """The interpreter Ansible should run its modules with on a node, from the node's facts
    (pure), instead of Ansible's own discovery (which takes the first ``python3.N`` on the login
    PATH: a pyenv shim of a version not selected there fails every module with "pyenv:
    python3.13: command not found"). Shims never count (the facts list none); of the others,
    at least ``ANSIBLE_TARGET_PYTHON``: a system one of the recipe's minor ``wanted``, else any
    system one (newest), else the recipe's minor anywhere, else the newest. None: no usable one."""
    usable = [p for p in pythons if "/shims/" not in p.path and _minor(p.version) >= ANSIBLE_TARGET_PYTHON]

    def rank(p: Interpreter) -> tuple:
        system = p.path.startswith(_SYSTEM_DIRS)
        same = wanted is not None and _minor(p.version) == _minor(wanted)
        return (not (system and same), not system, not same, tuple(-x for x in _minor(p.version)), p.path)

    return min(usable, key=rank, default=None)
