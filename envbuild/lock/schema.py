"""The lock schema ("envbuild.lock/1"): every package and git pin of one recipe on one target.

A lock is byte-stable: it holds no timestamps and no machine paths, its keys come out in the
order the fields are declared here, packages in install order (dependencies first) and git
components in recipe order. Pins that could not be checked from here are kept, marked
``verified: false`` with ``reason: "not verified: <why>"``; a hash is never invented.

Example (abridged)::

    schema: envbuild.lock/1
    recipe: {name: cpu-reference, digest: 3f1c...}
    target: {name: local, digest: 9ab2...}
    python: "3.11"
    platform: {python_platform: x86_64-manylinux_2_36, tags: [cp311, manylinux_2_36_x86_64]}
    resolve_as_of: "2025-06-01"
    envbuild_version: 0.1.0
    packages:
      - name: six
        version: 1.17.0
        source: pypi
        required_by: [recipe]
        dist: {filename: six-1.17.0-py2.py3-none-any.whl, url: https://files..., sha256: 4721...}
        verified: true
    git:
      - name: nanogpt
        url: https://github.com/example/nanogpt
        ref: main
        sha: 0123...
        verified: false
        reason: "not verified: no mirror for https://github.com/example/nanogpt"
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from envbuild.names import project_name

LOCK_SCHEMA = "envbuild.lock/1"
KNOWN_SCHEMAS = (LOCK_SCHEMA,)


class _M(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class Named(_M):
    """A recipe or target as the lock saw it: name plus sha256 of its canonical JSON."""

    name: str
    digest: str


class PlatformInfo(_M):
    """What the resolution was made for (the target's interpreter and platform, not ours)."""

    python_platform: str  # uv's --python-platform, e.g. x86_64-manylinux_2_31
    tags: list[str]  # interpreter tag and platform tag, e.g. [cp38, manylinux_2_31_x86_64]


class Dist(_M):
    """The one distribution file chosen for the target: wheel, or sdist when no wheel fits."""

    kind: Literal["wheel", "sdist"]
    filename: str
    url: str
    sha256: str


class StandIn(_M):
    """What stands in, on a CPU test node, for a package the lock does not install from a
    reachable source (``preinstalled`` by an image, module or base environment, or pinned on an
    unreachable index): PyPI's release ``version`` (None: nothing public can stand in, and the
    proof names the package as not exercised), with why and the page that says so. Read only by
    the CPU import proof (``envbuild.testbed.importproof``); the real plan never installs it."""

    version: str | None = None
    why: str
    source: str
    dist: Dist | None = None  # the wheel, for a stand-in the plan's own step installs (hash-checked)


class FromWheelhouse(_M):
    """The locked bytes were read from a ``--wheelhouse`` when the lock was made; ``dist.url``
    names the same bytes upstream (``envbuild.lock.upstream``). ``upstream``: ``checked`` when
    the index listed the file with this sha256, ``derived`` when the URL follows from the
    index's known layout and the index could not be asked, ``none`` when no upstream could be
    named (``dist.url`` is then ``wheelhouse/<file>``: exporting or bundling needs the folder)."""

    upstream: Literal["checked", "listed", "derived", "none"]
    how: str


class LockedPackage(_M):
    """One Python package at an exact version.

    ``source``: ``pypi``, an index / find-links URL, or ``preinstalled`` (``wheelhouse`` in
    locks made before upstream URLs were recorded). ``wheelhouse``: set when the bytes were read
    from a wheelhouse; ``dist.url`` is still the upstream URL.
    ``required_by``: ``recipe`` for packages the recipe names, else the locked packages that
    depend on it. ``requested``: the recipe's version spec (top-level packages only).
    """

    name: str
    version: str
    source: str
    required_by: list[str] = Field(default_factory=list)
    requested: str | None = None
    dist: Dist | None = None
    provided_by: str | None = None  # preinstalled: "image nvcr.io/...", "module conda/2023-10-04"
    verified: bool
    reason: str | None = None
    note: str | None = None  # e.g. dependencies not resolved (sdist built without isolation)
    # a stand-in for the recipe's build, e.g. "1.10.1+cpu from https://download.pytorch.org/...":
    # PyPI's build of the same version (it runs on CPU) where the recipe's index is unreachable
    replaces: str | None = None
    # a preinstalled or unreachable package: what stands in for it on a CPU test node
    stand_in: StandIn | None = None
    wheelhouse: FromWheelhouse | None = None

    @property
    def from_wheelhouse(self) -> bool:
        """The bytes were taken from a wheelhouse at lock time (an older lock: ``source``)."""
        return self.wheelhouse is not None or self.source == "wheelhouse"


class LockedGit(_M):
    """One git component: URL, ref and full SHA, with what was checked about it."""

    name: str
    url: str
    ref: str
    sha: str | None = None  # None only when the recipe itself has no SHA (unverified pin)
    verified: bool
    reason: str | None = None
    ancestors_checked: list[str] = Field(default_factory=list)
    commit_date: str | None = None
    subject: str | None = None
    note: str | None = None  # e.g. the ref moved on past the pin
    # a git dependency of a source install (``name @ git+URL`` in its metadata): the sources
    # that declare it; None for the recipe's own sources
    required_by: list[str] | None = None


class DeclaredDeps(_M):
    """What one source install declares as its dependencies, read at its locked commit.

    ``origin``: the file read (``setup.py install_requires``, ``pyproject.toml
    [project].dependencies``, ``requirements.txt``); ``requirements``: the lines handed to the
    resolver (their packages carry ``source:<component>`` in ``required_by``); ``dropped``:
    lines not resolved, with the reason (provided by a source, preinstalled, marker false,
    a git dependency locked under ``git``); ``unread``: why nothing could be read;
    ``build_requires``: what building the tree needs (``[build-system].requires``, or
    setuptools for a setup.py), resolved like its dependencies, less the build tooling.
    """

    component: str
    sha: str | None = None
    origin: str | None = None
    requirements: list[str] | None = None
    dropped: list[str] | None = None
    unread: str | None = None
    # what building the tree needs in the environment (it builds with --no-build-isolation):
    # the lines resolved (their packages carry build:<component>), and where they were read
    build_origin: str | None = None
    build_requires: list[str] | None = None


class Lock(_M):
    """The whole lockfile."""

    schema_: Literal["envbuild.lock/1"] = Field(LOCK_SCHEMA, alias="schema")
    recipe: Named
    target: Named
    python: str
    platform: PlatformInfo
    resolve_as_of: str | None = None
    envbuild_version: str
    packages: list[LockedPackage] = Field(default_factory=list)
    tooling: list[LockedPackage] = Field(default_factory=list)  # pip/setuptools/wheel, hashed
    git: list[LockedGit] = Field(default_factory=list)
    declared: list[DeclaredDeps] | None = None  # source installs' own dependencies, as read

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    def package(self, name: str) -> LockedPackage | None:
        """The locked package called ``name`` (PEP 503 normalized comparison)."""
        key = normalize(name)
        return next((p for p in self.packages if normalize(p.name) == key), None)

    def git_pin(self, name: str) -> LockedGit | None:
        return next((g for g in self.git if g.name == name), None)


normalize = project_name  # the name the lock modules import it by
