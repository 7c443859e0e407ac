"""The knowledge tables `envbuild port` reads (envbuild/port/data/*.yaml), as typed rows.

* ``torch_builds.yaml``: published torch builds (version, CUDA tag, archs, Pythons, driver
  minimum, source) a recipe may move to when the node does not bring its own torch;
* ``node_stacks.yaml``: targets whose nodes bring their own torch (h100-venv: torch 2.11.0+cu130
  in /opt/torch/.venv, Python 3.12), the packages those nodes have, and the day a port to them
  resolves as of (``resolve_as_of``);
* ``fixes.yaml``: known fixes (what breaks and why, source, when, files, pattern, replacement);
* ``packages.yaml``: PyPI packages whose release tag is read in the git mirror, the
  upgrades a release needs on the new stack, and the packages a port does not put in place of
  an image's (``not_installed``: their only release is a CUDA build from source).

Every row names its source; ``tests/draft_port/test_port_tables.py`` keeps the tables loadable, their
driver minimums equal to ``envbuild.cuda_arch``'s and each fix row's example true.

A site or a user adds rows without editing envbuild: folders holding files of the same names
and layout (``envbuild.knowledge``: ``ENVBUILD_KNOWLEDGE_PATH`` or an ``envbuild.knowledge``
entry point). Their rows come after the shipped ones; an id (a fix, a node stack's target, a
package) that a shipped or earlier row already has is refused, naming both files: a site never
silently replaces what envbuild ships. The files are data, read as YAML and validated, never run.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from envbuild import knowledge
from envbuild.shipped import PACKAGE
from envbuild.versions import admits

DATA = PACKAGE / "port" / "data"
KNOWLEDGE_PATH = knowledge.KNOWLEDGE_PATH

#: the stack facts a row's ``when`` may name (``envbuild.port.stack.Stack.versions``)
CONDITION_KEYS = ("torch", "python", "nvcc", "numpy", "setuptools", "omegaconf", "arch")


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TorchBuild(_Row):
    """One published torch build: ``torch`` + ``cuda`` tag with kernels for ``archs``."""

    torch: str
    cuda: str
    archs: list[str]
    pythons: list[str]
    driver_min: str
    index: str | None = None
    index_kind: Literal["pypi", "find-links", "index-url"] = "pypi"
    source: str
    note: str = ""

    @property
    def cuda_version(self) -> str:
        """``cu118`` -> ``11.8``."""
        digits = self.cuda.removeprefix("cu")
        return f"{digits[:-1]}.{digits[-1]}"


class ResolveAsOf(_Row):
    """The day a port to a stack resolves its unpinned requirements as of (``resolve_as_of``),
    when the published date predates the stack: ``why`` that day, and its ``source``."""

    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    why: str = Field(min_length=1)
    source: str = Field(min_length=1)


class NodeStack(_Row):
    """A target whose nodes bring their own torch, every package they have, and the day a
    port to them resolves as of."""

    target: str
    torch: str
    cuda: str
    python: str
    prefix: str
    source: str
    resolve_as_of: ResolveAsOf | None = None
    packages: dict[str, str] = Field(default_factory=dict)


Condition = dict[str, str | bool]


class _Conditional(_Row):
    when: list[Condition] = Field(min_length=1)

    @field_validator("when")
    @classmethod
    def _known(cls, v: list[Condition]) -> list[Condition]:
        for cond in v:
            for key, value in cond.items():
                if key == "node_torch":
                    if not isinstance(value, bool):
                        raise ValueError("node_torch: true or false")
                elif key == "absent":
                    if not isinstance(value, str) or not value:
                        raise ValueError("absent: the name of a package")
                elif key not in CONDITION_KEYS:
                    raise ValueError(f"unknown condition {key!r} (known: node_torch, absent, "
                                     f"{', '.join(CONDITION_KEYS)})")
        return v

    def holds(self, versions: dict[str, str | None], node_torch: bool,
              installed: frozenset[str] | None = None) -> bool:
        """Whether any ``when`` entry holds on a stack of ``versions``; a version the stack
        does not know makes its entry false (never guessed). ``absent: PKG`` holds when
        ``installed`` (every package the variant has: the node's, its pins, its sources; names
        canonical) is known and lacks PKG."""
        return any(_entry_holds(cond, versions, node_torch, installed) for cond in self.when)


def canonical(name: str) -> str:
    """A package name as the tables compare it (``Transformer_Engine`` -> ``transformer-engine``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _entry_holds(cond: Condition, versions: dict[str, str | None], node_torch: bool,
                 installed: frozenset[str] | None = None) -> bool:
    for key, spec in cond.items():
        if key == "node_torch":
            if bool(spec) != node_torch:
                return False
            continue
        if key == "absent":
            if installed is None or canonical(str(spec)) in installed:
                return False
            continue
        have = versions.get(key)
        if not have or not admits(str(spec), have):
            return False
    return True


class Example(_Row):
    before: str
    after: str


class Fix(_Conditional):
    """A known fix: where ``pattern`` is in a file of ``files`` at the pinned commit (and
    ``requires`` too), ``replace`` takes its place ({cc}/{cc_dot}: the node's GPU arch)."""

    id: str
    breaks: str
    source: str
    files: list[str] = Field(min_length=1)
    scope: Literal["code", "launch"] = "code"
    # where in a Python file a match counts: ``code`` (not inside a string literal or a comment,
    # as Python's tokenizer reads the file: ``"np.int" in size`` is text, not the alias) or
    # ``anywhere`` (a flag inside a string: ``'arch=compute_70,code=sm_70'``)
    matches: Literal["code", "anywhere"] = "code"
    grep: str = Field(min_length=1)
    pattern: str
    replace: str
    requires: str | None = None
    example: Example

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str) -> str:
        re.compile(v, re.MULTILINE)
        return v

    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.MULTILINE)

    def replacement(self, cc: str | None) -> str:
        """The replacement template with the node's arch filled in (``9.0`` -> 90)."""
        dot = cc or "{cc_dot}"
        return self.replace.replace("{cc}", dot.replace(".", "")).replace("{cc_dot}", dot)


class PackageRepo(_Row):
    """A PyPI package whose release ``tag`` is read in the mirror; ``requirements``: the files
    its setup.py reads install_requires from through a function (the lock reads them when the
    release is built from its tree)."""

    package: str
    url: str
    tag: str
    source: str
    requirements: list[str] = Field(default_factory=list)

    def tag_of(self, version: str) -> str:
        return self.tag.replace("{version}", version)


class Upgrade(_Conditional):
    """A release of ``package`` that cannot run on the stack where ``pattern`` is in ``files``
    at its tag, and the release ``to`` that can."""

    id: str
    package: str
    breaks: str
    source: str
    files: list[str] = Field(min_length=1)
    grep: str = Field(min_length=1)
    pattern: str
    to: str


class NotInstalled(_Row):
    """A package a published image or module carried that a port does not put in its place
    when the node lacks it: its only release for the new stack is a CUDA build from source
    against the installed torch. ``modules``: what it provides (left out of import_check); the
    setup's imports of them are guarded by the fix rows whose ``when`` names it ``absent``."""

    package: str
    modules: list[str] = Field(min_length=1)
    why: str
    source: str


class _TorchTable(_Row):
    schema_: int = Field(alias="schema")
    builds: list[TorchBuild]


class _StackTable(_Row):
    schema_: int = Field(alias="schema")
    stacks: list[NodeStack]


class _FixTable(_Row):
    schema_: int = Field(alias="schema")
    fixes: list[Fix]


class _PackageTable(_Row):
    schema_: int = Field(alias="schema")
    repos: list[PackageRepo]
    upgrades: list[Upgrade]
    not_installed: list[NotInstalled] = Field(default_factory=list)


def folders() -> tuple[Path, ...]:
    """The folders whose tables are read: the shipped one, then the site's and user's
    (``envbuild.knowledge``)."""
    return (DATA, *knowledge.folders())


def _tables(name: str, model: type[_Row], where: tuple[tuple[Path, int | None], ...]) -> list[tuple[Path, _Row]]:
    return knowledge.tables(name, model, where, DATA)


def _merged(name: str, model: type[_Row], field: str, key, where: tuple) -> tuple:  # noqa: ANN001
    return knowledge.merged(name, model, field, key, where, DATA)


@functools.lru_cache(maxsize=8)
def _torch_builds(where: tuple) -> tuple[TorchBuild, ...]:
    return _merged("torch_builds.yaml", _TorchTable, "builds", lambda b: f"{b.torch}+{b.cuda}", where)


def torch_builds() -> tuple[TorchBuild, ...]:
    return _torch_builds(knowledge.stamped(folders(), "torch_builds.yaml"))


@functools.lru_cache(maxsize=8)
def _node_stacks(where: tuple) -> tuple[NodeStack, ...]:
    return _merged("node_stacks.yaml", _StackTable, "stacks", "target", where)


def node_stacks() -> tuple[NodeStack, ...]:
    return _node_stacks(knowledge.stamped(folders(), "node_stacks.yaml"))


@functools.lru_cache(maxsize=8)
def _fixes(where: tuple) -> tuple[Fix, ...]:
    return _merged("fixes.yaml", _FixTable, "fixes", "id", where)


def fixes() -> tuple[Fix, ...]:
    return _fixes(knowledge.stamped(folders(), "fixes.yaml"))


@functools.lru_cache(maxsize=8)
def _package_table(where: tuple) -> tuple[tuple[PackageRepo, ...], tuple[Upgrade, ...]]:
    return (_merged("packages.yaml", _PackageTable, "repos", "package", where),
            tuple(row for _, t in _tables("packages.yaml", _PackageTable, where) for row in t.upgrades))


def package_table() -> tuple[tuple[PackageRepo, ...], tuple[Upgrade, ...]]:
    return _package_table(knowledge.stamped(folders(), "packages.yaml"))


@functools.lru_cache(maxsize=8)
def _not_installed(where: tuple) -> tuple[NotInstalled, ...]:
    return _merged("packages.yaml", _PackageTable, "not_installed", "package", where)


def not_installed() -> tuple[NotInstalled, ...]:
    """The packages a port leaves out where an image or module carried them (``NotInstalled``)."""
    return _not_installed(knowledge.stamped(folders(), "packages.yaml"))


def node_stack(target: str) -> NodeStack | None:
    return next((s for s in node_stacks() if s.target == target), None)


def package_repo(name: str) -> PackageRepo | None:
    return next((r for r in package_table()[0] if r.package == name.lower()), None)
