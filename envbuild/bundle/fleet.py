"""A fleet: every wheel downloaded once on the controller, pushed to each node; every extension
built once per node kind.

``stage_wheels(plans, lock, wheelhouse)`` is what ``provision`` calls for an inventory of
several nodes: each distribution a node's pip steps install is fetched once into the
controller's download cache (``envbuild.bundle.fetch``: wheelhouse, cache, else the lock's URL;
sha256 checked against the lock whatever the origin), linked into one folder per set of files
(``$ENVBUILD_HOME/fleet/<digest[:16]>/wheels``) and planned as the ``wheels`` step
(``PlanOptions.fleet``): copied to ``<prefix>/.envbuild/fleet`` on each node as one archive
(``<folder>.tar``, made once per set of files), pip installs
``--no-index`` from it, the hashes in the pip steps as before. The bytes taken from the index
therefore do not grow with the number of nodes (``Staged.downloaded_bytes`` says how many).

A plan that needs a file the lock has no verified copy of (an unhashed package, a bare spec)
is not pushed: ``stage_wheels`` returns None with the reason and each node uses its index.

``wheel_builders(plans)`` elects, for each extension wheel (Apex and the like, keyed by the
planner's ``cache_key``: the same apex commit, patches, torch, CUDA, nvcc, archs, options and
python; one key per node kind), the node that builds it; the others wait for it in the
playbook (``tasks/wheel.yml``) and install the controller's copy. The report's fleet view shows each node's
kind (``envbuild.report.fingerprint.node_kind``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.bundle.fetch import cache_root, fetch_dist
from envbuild.bundle.pack import _lock_entry, planned_requirements
from envbuild.fsio import canonical_json, sha256_text, write_tar
from envbuild.plan.params import BundleParams, StagedFile


@dataclass
class Staged:
    """The pushed wheels: the plan's ``wheels`` step params and where the bytes came from."""

    params: object  # envbuild.plan.params.BundleParams (dir set per node by the planner)
    origins: dict[str, str] = field(default_factory=dict)  # file -> wheelhouse|cache|download|staged
    sizes: dict[str, int] = field(default_factory=dict)

    def bytes_from(self, origin: str) -> int:
        return sum(self.sizes[f] for f, o in self.origins.items() if o == origin)

    @property
    def downloaded_bytes(self) -> int:
        return self.bytes_from("download")

    def summary(self, nodes: int) -> dict:
        """run.json's ``fleet``."""
        return {"pushed": True, "nodes": nodes, "digest": self.params.digest, "dir": self.params.src,
                "files": len(self.origins), "bytes": sum(self.sizes.values()),
                "downloaded_bytes": self.downloaded_bytes, "cache_bytes": self.bytes_from("cache"),
                "wheelhouse_bytes": self.bytes_from("wheelhouse"), "staged_bytes": self.bytes_from("staged"),
                "origins": dict(sorted(self.origins.items()))}


def unpushable(plans: dict, lock) -> str | None:
    """Why the plans' distributions cannot all be pushed (None: they can)."""
    if lock is None:
        return "no lock"
    for plan in plans.values():
        if plan.backend == "container":
            return "the container backend installs inside the image"
        for name, version in planned_requirements(plan):
            entry = _lock_entry(lock, name, version)
            if entry is None or entry.dist is None or not entry.verified or not entry.dist.sha256:
                return f"{name} {version} has no verified file in the lock"
    return None


def stage_wheels(plans: dict, lock, wheelhouse: Path | None, home: Path, say=lambda _m: None) -> Staged:
    """Fetch every distribution of ``plans`` once (hash-checked) and link them into one folder;
    see the module docstring. Call ``unpushable`` first."""
    entries = {}
    for plan in plans.values():
        for name, version in planned_requirements(plan):
            entry = _lock_entry(lock, name, version)
            entries.setdefault(entry.dist.filename, entry)
    files = sorted((f"wheels/{fn}", e.dist.sha256) for fn, e in entries.items())
    digest = sha256_text(canonical_json(files))
    root = home / "fleet" / digest[:16]
    (root / "wheels").mkdir(parents=True, exist_ok=True)
    staged = Staged(params=None)
    done = root / ".complete"  # every file below was hash-checked when it was staged
    complete = done.is_file() and done.read_text() == digest
    for fn, entry in sorted(entries.items()):
        dest = root / "wheels" / fn
        if complete and dest.is_file():
            staged.origins[fn], staged.sizes[fn] = "staged", dest.stat().st_size
            continue
        part = dest.with_name(f".{fn}.part")
        origin = fetch_dist(entry, part, wheelhouse)  # the copy out of the cache, hash-checked
        cached = cache_root() / entry.dist.sha256 / fn
        if origin != "wheelhouse" and cached.is_file():  # a link, not a second copy, when it can
            part.unlink()
            try:
                os.link(cached, part)
            except OSError:
                shutil.copyfile(cached, part)
        os.replace(part, dest)
        staged.origins[fn], staged.sizes[fn] = origin, dest.stat().st_size
        say(f"{fn}: {origin}, sha256 ok")
    done.write_text(digest)
    archive = write_tar(root, [name for name, _ in files], root.with_name(root.name + ".tar"))
    staged.params = BundleParams(digest=digest, src=str(root), archive=str(archive), git={},
                                 files=[StagedFile(name=name, sha256=sha, size=staged.sizes[name[7:]])
                                        for name, sha in files])
    return staged


def wheel_builders(plans: dict) -> dict[str, str]:
    """{cache key: the node that builds that wheel}: the first node (by name) whose plan builds it."""
    out: dict[str, str] = {}
    for host in sorted(plans):
        for step in plans[host].apex_builds():
            if step.params.cache_key:
                out.setdefault(step.params.cache_key, host)
    return out
