"""Drift: the pure comparison of an expected environment with an observed one."""

from __future__ import annotations

from typing import Any

from envbuild.names import project_name
from envbuild.observe.expected import Expected, expected_state
from envbuild.observe.model import Drift, Observed

PRESENT = {"applied", "already-applied", "recorded"}


def same_version(locked: str, installed: str) -> bool:
    """PEP 440 ``==locked``: a lock without a local label accepts ``2.13.0+cpu`` for ``2.13.0``."""
    from packaging.version import InvalidVersion, Version

    if locked == installed:
        return True
    try:
        lv, iv = Version(locked), Version(installed)
    except InvalidVersion:
        return False
    return lv == iv or (lv.local is None and lv == Version(iv.public))


def compare(lock: dict | None, plan: Any | None, observed: Observed,
            baseline: Observed | None = None) -> list[Drift]:
    """Every difference between (lock, plan) and what ``observed`` found, in a stable order.

    ``baseline`` is the state recorded right after provisioning (the run's observed.json):
    built extensions (.so hashes) have no pin in the lock, so they are compared with it, and a
    patch recorded then but not now is missing. A planned patch that never left a diff (the
    tree already had it) is not drift; one whose diff no longer applies in reverse is.

    >>> compare({"packages": [{"name": "six", "version": "1.16.0"}]}, None,
    ...         Observed(packages={"six": "1.17.0"}))[0].kind
    'package-version'
    """
    return compare_expected(expected_state(lock, plan), observed, baseline)


def compare_expected(exp: Expected, observed: Observed, baseline: Observed | None = None) -> list[Drift]:
    """Like ``compare`` with the expectation already built."""
    host = observed.host
    drift: list[Drift] = []
    installed = {project_name(k): v for k, v in observed.packages.items()}
    for name, version in exp.packages.items():
        have = installed.get(name)
        if have is None:
            drift.append(Drift(kind="package-missing", subject=name, expected=version, host=host))
        elif not same_version(version, have):
            drift.append(Drift(kind="package-version", subject=name, expected=version, observed=have, host=host))
    for name, sha in exp.git.items():
        if name not in observed.git and exp.sources and name not in exp.sources:
            continue  # locked, but not a tree this node checks out
        have = observed.git.get(name)
        if have != sha:
            drift.append(Drift(kind="commit-moved", subject=name, expected=sha, observed=have, host=host))
    recorded = {p.id: p for p in observed.patches}
    had = {p.id for p in baseline.patches} if baseline is not None else set()
    for pid, component in exp.patches.items():
        p = recorded.get(pid)
        if p is None and pid in had:  # recorded at provision time, gone now
            drift.append(Drift(kind="patch-missing", subject=pid, expected=f"applied to {component or '?'}",
                               observed="not recorded", host=host))
        elif p is not None and p.status not in PRESENT:
            drift.append(Drift(kind="patch-missing", subject=pid, expected=f"applied to {component or '?'}",
                               observed=p.status, host=host))
    if baseline is not None:
        now = {e.path: e.sha256 for e in observed.extensions}
        for ext in baseline.extensions:
            if now.get(ext.path) != ext.sha256:
                drift.append(Drift(kind="so-hash-changed", subject=ext.path, expected=ext.sha256,
                                   observed=now.get(ext.path), host=host))
    # only the variables the plan's env_file step declares (recipe and target): the file's own
    # PATH/VIRTUAL_ENV lines activate the environment and are not pins
    for var, value in exp.env.items():
        if var not in observed.env:
            drift.append(Drift(kind="env-missing", subject=var, expected=value, host=host))
        elif observed.env[var] != value:
            drift.append(Drift(kind="env-changed", subject=var, expected=value, observed=observed.env[var], host=host))
    return drift
