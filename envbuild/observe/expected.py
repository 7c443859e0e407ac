"""What an environment should contain, read from a run's lock and plan (pure).

The lock holds ``packages`` ({name, version, sha256...}) and ``git`` ({name, url, sha,
verified}); the plan holds the source trees (``git_source`` steps), the patches it decided to
apply (``patch`` steps) and the environment file (``env_file`` step). Readers are tolerant of
the lock being JSON or YAML (with a comment header) and of sections nesting the lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envbuild.errors import InputError
from envbuild.names import project_name
from envbuild.plan.model import Plan
from envbuild.userfile import loads_json, read_text
from envbuild.yamlsrc import load_yaml

NOT_APPLIED = {"unchanged", "skipped", "skip", "refused", "not-applicable", "already-applied", "expect"}



@dataclass
class Expected:
    """The expected state of one node's environment."""

    packages: dict[str, str] = field(default_factory=dict)  # canonical name -> exact version
    git: dict[str, str] = field(default_factory=dict)  # source name -> full sha
    sources: dict[str, str] = field(default_factory=dict)  # source name -> dest dir on the node
    patches: dict[str, str] = field(default_factory=dict)  # patch id -> component
    env: dict[str, str] = field(default_factory=dict)  # environment file variables
    env_file: str | None = None
    prefix: str | None = None
    python: str | None = None  # "<prefix>/bin/python"


def read_lock(path: str | Path) -> dict:
    """Load a lockfile (JSON, or YAML with a DO-NOT-EDIT comment header).

    Anything that is not a mapping in either syntax (binary, not UTF-8, deeply nested, an
    alias bomb, a directory) is an InputError naming the file.
    """
    hint = "regenerate it with `envbuild lock`"
    path = Path(path)
    text = read_text(path, "lockfile", hint=hint)
    try:
        data = loads_json(text, path, "lockfile", hint)
    except InputError:
        data, _ = load_yaml(path, text)  # the lock envbuild writes; refuses what is neither
    if not isinstance(data, dict):
        raise InputError(f"{path}: lockfile is not a mapping", hint=hint)
    return data


def _walk(obj: Any, key: str):
    """Every value stored under ``key`` at any depth."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                yield v
            yield from _walk(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v, key)


def lock_packages(lock: dict) -> dict[str, str]:
    """{canonical name: version} of every locked package."""
    out: dict[str, str] = {}
    for value in _walk(lock, "packages"):
        if isinstance(value, dict):
            rows = [{"name": k, **v} if isinstance(v, dict) else {"name": k, "version": v}
                    for k, v in value.items()]
        else:
            rows = value if isinstance(value, list) else []
        for row in rows:
            if isinstance(row, dict) and row.get("name") and row.get("version"):
                version = str(row["version"]).lstrip("=")
                out[project_name(str(row["name"]))] = version
    return dict(sorted(out.items()))


def lock_git(lock: dict) -> dict[str, str]:
    """{source name: sha} of every locked git source."""
    out: dict[str, str] = {}
    for key in ("git", "sources"):
        for value in _walk(lock, key):
            if isinstance(value, dict):
                rows = [{"name": k, **v} for k, v in value.items() if isinstance(v, dict)]
            else:
                rows = value if isinstance(value, list) else []
            for row in rows:
                if isinstance(row, dict) and row.get("name") and row.get("sha"):
                    out[str(row["name"])] = str(row["sha"])
    return dict(sorted(out.items()))


def expected_state(lock: dict | None, plan: Any | None) -> Expected:
    """Combine a lock (dict) and a plan (``Plan`` or its JSON dict) into an ``Expected``."""
    exp = Expected()
    if lock:
        exp.packages = lock_packages(lock)
        exp.git = lock_git(lock)
    if plan is None:
        return exp

    plan = plan if isinstance(plan, Plan) else Plan.model_validate(plan)
    exp.prefix = plan.prefix
    exp.python = f"{plan.prefix.rstrip('/')}/bin/python"
    exp.env_file = f"{plan.prefix.rstrip('/')}/.envbuild/env.sh"
    for source in plan.sources():
        exp.sources[source.params.name] = source.params.dest
        if source.params.sha and source.params.name not in exp.git:
            exp.git[source.params.name] = source.params.sha
    for patch in plan.patches():
        p = patch.params
        outcome = "expect" if p.patch_kind == "expect" else (p.decision or "patched")
        if outcome not in NOT_APPLIED:
            exp.patches[p.id] = p.component
    env_file = plan.env_file()
    if env_file is not None:
        exp.env.update(env_file.params.vars)
        exp.env_file = env_file.params.path
    for install in plan.pip_installs() if not lock else []:
        for req in install.params.requirements:
            if req.version[:1].isdigit():
                exp.packages[project_name(req.name)] = req.version
    return exp
