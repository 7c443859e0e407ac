"""No rollback of a signed bundle: a client refuses a bundle older than the newest one it
accepted for the same recipe and target, as TUF's clients refuse older metadata.

A valid signature says that the key once signed these bytes, not that they are the newest:
whoever controls a mirror or a share could otherwise serve any bundle the key ever signed (an
older lock, with the vulnerabilities since fixed) under the newer one's name. The signed
statement binds the bundle's name (its subject), its lock digest and its creation time
(``runDetails.metadata.finishedOn``: the end of ``envbuild bundle``); ``check`` compares them
with the bundle and with the newest statement this ``ENVBUILD_HOME`` accepted for that recipe
and target, ``remember`` records an accepted one. The record is
``$ENVBUILD_HOME/trust/accepted.json`` (one JSON object, written whole, the folder 0700):

    {"bundle": {"cpu-reference/local": {"created": "2026-11-27T04:10:00Z", "sha256": "...",
                                        "name": "cpu-reference.tar", "lock_digest": "..."}}}

The same bundle again (same sha256) is accepted; another bundle created at the same second or
earlier is refused (CheckFailed, exit 1), nothing unpacked.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from envbuild.errors import CheckFailed
from envbuild.rundir import envbuild_home

RECORD = Path("trust") / "accepted.json"


def created(stmt: dict) -> datetime:
    """The statement's creation time (``finishedOn``, UTC); CheckFailed when it has none."""
    meta = stmt.get("predicate", {}).get("runDetails", {}).get("metadata", {})
    raw = meta.get("finishedOn") or meta.get("startedOn")
    try:
        when = datetime.strptime(str(raw), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise CheckFailed(f"the signed statement has no creation time (finishedOn {raw!r})",
                          hint="sign the bundle again with `envbuild bundle --sign-key`; nothing was unpacked") from None
    return when.replace(tzinfo=timezone.utc)


def subject_of(stmt: dict) -> dict:
    """What a bundle's statement vouches for: recipe, target, lock digest, name, sha256, created."""
    params = stmt["predicate"]["buildDefinition"]["externalParameters"]
    subject = stmt["subject"][0]
    return {"recipe": str(params.get("recipe", "")), "target": str(params.get("target", "")),
            "lock_digest": str(params.get("lockDigest", "")), "name": str(subject.get("name", "")),
            "sha256": str(subject["digest"]["sha256"]), "created": created(stmt).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _path(home: Path | None) -> Path:
    return (home or envbuild_home()) / RECORD


def _read(home: Path | None) -> dict:
    path = _path(home)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CheckFailed(f"{path}: the record of accepted bundles cannot be read ({exc})",
                          hint="restore it, or remove it to trust any bundle the key signed again") from None
    return data if isinstance(data, dict) else {}


def check(stmt: dict, home: Path | None = None) -> dict:
    """The statement's subject (``subject_of``) once it is no older than the newest bundle
    accepted here for its recipe and target; CheckFailed (exit 1) for an older one."""
    said = subject_of(stmt)
    newest = _read(home).get("bundle", {}).get(f"{said['recipe']}/{said['target']}")
    if not newest or newest.get("sha256") == said["sha256"]:
        return said
    if said["created"] <= str(newest.get("created", "")):
        raise CheckFailed(f"the bundle {said['name']} for {said['recipe']} on {said['target']} was signed as made "
                          f"{said['created']}, not after the newest one accepted here ({newest.get('name')}, made "
                          f"{newest.get('created')}, sha256 {str(newest.get('sha256'))[:16]}): a rollback",
                          hint="a mirror or share served an older bundle the key once signed; get the newest one "
                               f"from its maker (the record: {_path(home)}); nothing was unpacked")
    return said


def remember(said: dict, home: Path | None = None) -> None:
    """Record ``said`` (``check``'s answer) as the newest accepted for its recipe and target."""
    from envbuild.fsio import write_atomic

    path = _path(home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = _read(home)
    bundles = data.setdefault("bundle", {})
    key = f"{said['recipe']}/{said['target']}"
    if str(bundles.get(key, {}).get("created", "")) > said["created"]:
        return  # a newer one was accepted meanwhile
    bundles[key] = {k: said[k] for k in ("created", "sha256", "name", "lock_digest")}
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
