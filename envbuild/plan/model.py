"""The plan: the ordered steps a provision runs on one node, as pure data.

A plan is a function of (recipe, lock, target, node facts, options). Renderers turn it into
Ansible variables (``envbuild.render.ansible``), later a Dockerfile, an Apptainer definition
or a scheduler script; executors run it. Nothing here touches a host.

Each step has a stable ``id`` and a ``digest`` over its parameters: an executor records the
digest of every finished step on the node, so a second provision skips unchanged steps and a
killed one resumes at the first unfinished step.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from envbuild.fsio import canonical_json

PLAN_SCHEMA = "envbuild.plan/1"

StepKind = Literal[
    "preflight",  # refuse an infeasible node before anything is installed
    "system_packages",  # apt/dnf packages (params: packages)
    "environment",  # create venv / conda prefix (params: kind, prefix, python, system_site_packages)
    "pip_tooling",  # pin pip/setuptools/wheel in the environment (params: requirements)
    "pip_install",  # pip install from a lock section (params: requirements, index, hashes, env)
    "git_source",  # clone/fetch at a full SHA and verify it (params: name, url, sha, dest)
    "patch",  # apply one declarative patch (params: patch, decision, dest)
    "build",  # commands run in a source tree (params: name, dest, commands, env)
    "apex_build",  # CUDA-aware Apex wheel build + install (params: see envbuild.patches.apex)
    "install_source",  # editable / wheel / pth install of a source tree (params: name, mode, dest)
    "env_file",  # write the environment file (params: path, vars)
    "import_check",  # import modules with the env's python (params: modules)
    "smoke",  # run the smoke benchmark (params: kinds)
]


class Step(BaseModel):
    """One idempotent unit of work on a node."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str  # stable, unique in the plan, e.g. "git:megatron"
    kind: StepKind
    title: str  # one line a person reads in progress output
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""  # why this step exists / why this decision

    @property
    def digest(self) -> str:
        payload = canonical_json({"id": self.id, "kind": self.kind, "params": self.params})
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


class Decision(BaseModel):
    """A choice the planner made from facts (patch applied or not, torch variant, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    subject: str  # "apex-cuda-check", "torch-variant", ...
    outcome: str  # "patched", "unchanged", "refused", "cu113", ...
    reason: str
    source: str | None = None


class Plan(BaseModel):
    """Everything one node needs, in order."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["envbuild.plan/1"] = Field(PLAN_SCHEMA, alias="schema")
    recipe: str
    target: str
    host: str
    prefix: str  # where the environment lives on the node
    backend: Literal["venv", "conda", "container", "module-venv"]
    lock_digest: str | None = None
    facts_origin: str = ""
    decisions: list[Decision] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"
