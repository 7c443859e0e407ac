"""Which installer a node's package steps use: ``uv pip install`` or pip. Pure.

uv installs the same ``--require-hashes`` lock requirements with the same index, find-links
and offline settings several times faster than pip. The planner pushes the controller's uv
(``envbuild.facts.uvbin``) to a node that can run it: the same OS and architecture, a C
library it links against (glibc at least its wheel's manylinux level), a Python uv installs
into (3.8 and later), an environment uv handles as pip does (a venv: ``venv`` and
``module-venv``; the conda and container backends keep pip). A step that needs pip's own
behaviour keeps pip even then (see ``step_installer``).

``--installer pip|uv|auto`` (``auto``: uv where it can run) chooses; ``uv`` refuses a node
where it cannot.

pip's configuration on the node reaches uv where it is in the environment (PIP_CERT and the CA
bundle variables, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS, PIP_DEFAULT_TIMEOUT:
``envbuild.actions.steps.UV_ENV_FROM_PIP``), not where it is in a pip.conf file, which uv does
not read: ``auto`` picks pip on a node whose pip.conf sets a certificate, index, trusted host or
proxy that no variable stands in for (``envbuild.facts.pipconf``), and says which.

    >>> from envbuild.facts.model import NodeFacts
    >>> from envbuild.facts.model import UvBinary
    >>> uv = UvBinary(version="0.13.9", sha256="0" * 64, os="linux", arch="x86_64", libc="glibc", glibc_min="2.17")
    >>> node = NodeFacts(host="n1", arch="x86_64", glibc="2.36")
    >>> choose_installer("auto", uv, node, "venv", "3.11")[0]
    'uv'
    >>> choose_installer("auto", uv, node.model_copy(update={"arch": "aarch64"}), "venv", "3.11")
    ('pip', "pip: the node is aarch64, the controller's uv 0.13.9 is a x86_64 build")
"""

from __future__ import annotations

from envbuild.errors import InputError
from envbuild.facts.model import UvBinary
from envbuild.facts.pipconf import unseen_by_uv

INSTALLERS = ("auto", "pip", "uv")
UV_BACKENDS = ("venv", "module-venv")
UV_MIN_PYTHON = (3, 8)


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in str(text).split(".")[:2])
    except (TypeError, ValueError):
        return None


def why_not_uv(uv: UvBinary | None, facts, backend: str, python: str) -> str | None:
    """Why the controller's uv cannot install on this node (None: it can)."""
    if uv is None:
        return "no uv binary from the controller (plan and provision take uv.find_uv_bin()'s)"
    if backend not in UV_BACKENDS:
        return f"the {backend} backend installs with pip"
    if not facts.arch:
        return "the node's architecture is not known"
    if facts.arch != uv.arch:
        return f"the node is {facts.arch}, the controller's uv {uv.version} is a {uv.arch} build"
    if uv.libc == "glibc":
        have, need = _version(facts.glibc), _version(uv.glibc_min)
        if have is None:
            return "the node's glibc is not known"
        if need is None:
            return f"the glibc uv {uv.version} needs is not known"
        if have < need:
            return f"the node's glibc {facts.glibc} is older than the {uv.glibc_min} uv {uv.version} needs"
    py = _version(python)
    if py is None or py < UV_MIN_PYTHON:
        return f"uv installs into Python 3.8 and later, the recipe's is {python}"
    return None


def choose_installer(requested: str, uv: UvBinary | None, facts, backend: str,
                     python: str) -> tuple[str, str]:
    """(installer, reason) of a node; InputError when ``uv`` was asked for and cannot run."""
    if requested not in INSTALLERS:
        raise InputError(f"unknown installer {requested!r}", hint="use --installer auto, pip or uv")
    if requested == "pip":
        return "pip", "pip: asked for (--installer pip)"
    why = why_not_uv(uv, facts, backend, python)
    unseen = unseen_by_uv(facts.pip_config, facts.pip_config_env)
    if requested == "auto" and unseen and why is None:
        return "pip", (f"pip: the node's pip reads {'; '.join(unseen)}, a pip.conf setting uv does not read "
                       "(uv takes pip's settings from the environment only); --installer uv to use uv anyway")
    if why is None:
        assert uv is not None
        return "uv", (f"uv {uv.version} ({uv.arch}, {uv.libc}) pushed to the node with its sha256: "
                      "the same hash-checked requirements, index and find-links as pip"
                      + (" (asked for)" if requested == "uv" else ""))
    if requested == "uv":
        raise InputError(f"--installer uv cannot install on {getattr(facts, 'host', 'the node')}: {why}",
                         hint="use --installer auto (uv where it can run, pip elsewhere) or --installer pip")
    return "pip", f"pip: {why}"


def step_installer(installer: str, *, no_build_isolation: list[str], env: dict[str, str]) -> tuple[str, str]:
    """The installer of one package step: pip where the step needs pip's own behaviour.
    PIP_* variables configure pip only: the whole step keeps pip. Packages built without
    isolation (against the environment's own setuptools and torch, as the published setup
    builds them with pip) are installed by pip in their own call even in a uv step
    (``envbuild.actions.steps``). Returns (installer, note for the step's reason)."""
    if installer != "uv":
        return "pip", ""
    pip_vars = sorted(k for k in env if k.startswith("PIP_"))
    if pip_vars:
        return "pip", f"pip: the step sets {', '.join(pip_vars)}, which only pip reads"
    if no_build_isolation:
        return "uv", (f"with uv pip install; pip for the builds without isolation "
                      f"({', '.join(no_build_isolation)}), as the published setup builds them")
    return "uv", "with uv pip install"
