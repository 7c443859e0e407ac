"""The bundle manifest ("envbuild.bundle/1"): every file of an offline bundle with its sha256.

A bundle is one tar file (``envbuild bundle``). Its first member is ``manifest.json``; every
other regular file in the tar is listed there with its size and sha256, and nothing else is
in the tar. ``verify_tree`` checks an unpacked bundle against its manifest and lists every
difference at once (a changed byte, a missing file, a file the manifest does not name).

Layout inside the tar::

    manifest.json
    lock.lock  recipe.yaml  target.yaml  plan.json
    playbooks/...                 provision.yml, ansible.cfg and the envbuild.node collection (also by hand)
    node/wheels/<file>            every locked distribution the plan installs (wheel or sdist)
    node/git/<name>.git/...       a shallow bare repository per source, holding its pinned commit (the
                                  recipe's sources, the git dependencies of source installs the lock
                                  pins); two sources of one repository at two commits are two
                                  repositories and two ``git`` pins, looked up by URL and commit
                                  (``Opened.check_plan``, ``BundleParams.git_commits``), never by URL alone
    prebuilt/<cache key>/<wheel>  extension wheels from the controller's build cache
    node/data/<file>              the recipe's data files (sha256 checked against the recipe's when packed)

``node/`` is what each node receives (``<prefix>/.envbuild/bundle``).

Example (abridged)::

    {"schema": "envbuild.bundle/1", "recipe": "cpu-reference", "target": "local",
     "lock_digest": "a6bf...", "files": [{"path": "node/wheels/six-1.16.0-py2.py3-none-any.whl",
     "sha256": "...", "size": 11053, "kind": "dist", "name": "six", "version": "1.16.0"}]}
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from envbuild.fsio import sha256_file

BUNDLE_SCHEMA = "envbuild.bundle/1"
MANIFEST = "manifest.json"
NODE_DIR = "node"
WHEELS = "node/wheels"
GIT = "node/git"
DATA = "node/data"
PREBUILT = "prebuilt"

FileKind = Literal["dist", "git", "prebuilt", "lock", "recipe", "target", "plan", "playbook", "data"]


class _M(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # one path component: a cache key, a project


def inside(value: str, what: str) -> str:
    """``value`` as a relative POSIX path that stays inside its folder: no absolute path, no
    ``..``, no backslash, no control character (a manifest is data from a file anyone can re-pack:
    a name that leaves its folder is refused before anything is written, --dry-run included)."""
    p = PurePosixPath(value)
    if (not value or p.is_absolute() or ".." in p.parts or "\\" in value
            or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value)):
        raise ValueError(f"{what} {value!r} is not a relative path inside its folder")
    return value


class BundleFile(_M):
    """One file of the bundle (``path`` relative to the bundle root, POSIX separators)."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    kind: FileKind
    name: str | None = None  # dist: the project; git: the source; prebuilt: the cache key; data: the recipe's name
    version: str | None = None  # dist: the locked version

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return inside(v, "file")

    @model_validator(mode="after")
    def _name(self) -> "BundleFile":
        if self.name is not None:
            inside(self.name, f"{self.kind} name")
            if self.kind in ("prebuilt", "dist") and not KEY.fullmatch(self.name):
                raise ValueError(f"{self.kind} name {self.name!r} is not one plain name (it becomes a folder)")
        return self


class GitPin(_M):
    """A pinned commit the bundle carries as a shallow bare repository at ``path`` (a
    submodule's is named ``<source>:<path in the tree>``)."""

    name: str
    url: str
    ref: str
    sha: str
    path: str  # node/git/<name>.git
    # a git dependency of source installs (the lock's git pin with required_by: ezpz's
    # ambivalent and enrich): the sources that declare it
    required_by: list[str] | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return inside(v, "git path")


class Omitted(_M):
    """Something the lock names that the bundle does not carry, and why."""

    name: str
    why: str


class Manifest(_M):
    """What ``envbuild bundle`` packed; ``files`` is sorted by path."""

    schema_: Literal["envbuild.bundle/1"] = Field(BUNDLE_SCHEMA, alias="schema")
    recipe: str
    target: str
    lock_digest: str
    envbuild_version: str
    python: str
    facts_origin: str = ""
    files: list[BundleFile] = Field(default_factory=list)
    git: list[GitPin] = Field(default_factory=list)
    omitted: list[Omitted] = Field(default_factory=list)  # preinstalled / provided by the node
    needs_network: list[str] = Field(default_factory=list)  # what no bundle can carry (apt)

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    def dists(self) -> list[BundleFile]:
        return [f for f in self.files if f.kind == "dist"]

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"



def tree_files(root: Path) -> list[str]:
    """Every regular file under ``root`` as a POSIX path relative to it, sorted."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def verify_tree(root: Path, manifest: Manifest) -> list[str]:
    """Every way the files under ``root`` differ from ``manifest`` (empty: they match)."""
    problems: list[str] = []
    listed = {f.path: f for f in manifest.files}
    present = set(tree_files(root)) - {MANIFEST}
    for path in sorted(present - set(listed)):
        problems.append(f"{path}: in the bundle but not in its manifest")
    for path, entry in sorted(listed.items()):
        file = root / path
        if path not in present:
            problems.append(f"{path}: named by the manifest ({entry.kind}"
                            + (f" {entry.name}" if entry.name else "") + ") but missing from the bundle")
            continue
        size = file.stat().st_size
        if size != entry.size:
            problems.append(f"{path}: {size} bytes, the manifest says {entry.size}")
            continue
        got = sha256_file(file)
        if got != entry.sha256:
            problems.append(f"{path}: sha256 {got[:16]}..., the manifest says {entry.sha256[:16]}...")
    for pin in manifest.git:
        if not any(f.path.startswith(pin.path + "/") for f in manifest.files):
            problems.append(f"git {pin.name}: the manifest names {pin.path} but lists none of its files")
    return problems
