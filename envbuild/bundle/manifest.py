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
    node/images/<file>.tar        a base image saved by its engine (``--image-tar``: ``podman save`` /
                                  ``docker save``), loaded on the node instead of pulled (``images``)

``offline`` says whether the node needs nothing beyond the bundle; ``needs_network`` names each
thing it still needs (``envbuild.bundle.network``: a base image not carried, apt packages, a
conda channel), with the plan step that needs it.

``node/`` is what each node receives (``<prefix>/.envbuild/bundle``).

Example (abridged)::

    {"schema": "envbuild.bundle/1", "recipe": "cpu-reference", "target": "local",
     "lock_digest": "a6bf...", "files": [{"path": "node/wheels/six-1.16.0-py2.py3-none-any.whl",
     "sha256": "...", "size": 11053, "kind": "dist", "name": "six", "version": "1.16.0"}],
     "offline": true, "needs_network": []}
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
IMAGES = "node/images"
PREBUILT = "prebuilt"

FileKind = Literal["dist", "git", "prebuilt", "lock", "recipe", "target", "plan", "playbook", "data", "image"]
NeedKind = Literal["base-image", "apt", "conda-channel", "pip-index", "git-remote", "data-url", "other"]


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


class CarriedImage(_M):
    """A base image the bundle carries as its engine saved it (``--image-tar``): ``name`` as the
    plan names it (and the archive tags it), ``id`` the image's ID in the archive (the sha256 of
    its configuration: what ``podman images --no-trunc`` shows once loaded)."""

    name: str
    path: str  # node/images/<file>.tar
    id: str = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return inside(v, "image path")


class NetworkNeed(_M):
    """Something the node still needs the network for: what, which plan step needs it, why, and
    how the bundle could carry it instead (``fix``; None: no bundle can)."""

    kind: NeedKind
    what: str
    step: str = ""  # "<host>: <step id>"
    why: str = ""
    fix: str | None = None

    def line(self) -> str:
        """One line for the command's output."""
        return (f"{self.kind} {self.what}" + (f" ({self.step})" if self.step else "")
                + (f": {self.why}" if self.why else "") + (f"; {self.fix}" if self.fix else ""))


def _old_need(value: object) -> object:
    """A bundle made before the needs were typed listed them as text ("system packages: ...")."""
    if isinstance(value, str):
        kind = "apt" if value.startswith("system packages: ") else "other"
        return {"kind": kind, "what": value.removeprefix("system packages: ")}
    return value


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
    images: list[CarriedImage] = Field(default_factory=list)  # base images carried (--image-tar)
    # what the node still needs the network for (envbuild.bundle.network); offline: none of it.
    # None in a bundle made before it was said: read from needs_network (``is_offline``)
    offline: bool | None = None
    needs_network: list[NetworkNeed] = Field(default_factory=list)

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("needs_network", mode="before")
    @classmethod
    def _typed_needs(cls, v: object) -> object:
        return [_old_need(x) for x in v] if isinstance(v, list) else v

    @model_validator(mode="after")
    def _offline_agrees(self) -> "Manifest":
        if self.offline is not None and self.offline == bool(self.needs_network):
            raise ValueError(f"offline is {self.offline} but needs_network lists {len(self.needs_network)} thing(s)")
        return self

    @property
    def is_offline(self) -> bool:
        """The node needs nothing beyond the bundle."""
        return not self.needs_network

    def image(self, name: str) -> CarriedImage | None:
        return next((i for i in self.images if i.name == name), None)

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
