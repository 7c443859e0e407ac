"""The observed state of one environment ("envbuild.observed/1") and a drift row.

``Observed`` is what the node-side script (``envbuild/node/observe.py``) prints; ``parse_observed`` turns
that text into the model with a clear error when a node printed something else.
"""

from __future__ import annotations

import json
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envbuild.errors import EnvironmentProblem

OBSERVED_SCHEMA: Final = "envbuild.observed/1"

DriftKind = Literal[
    "package-version",  # installed version differs from the lock
    "package-missing",  # a locked package is not installed
    "commit-moved",  # a source tree's HEAD is not the pinned SHA
    "patch-missing",  # a planned patch is not recorded or no longer present in the tree
    "so-hash-changed",  # a built extension differs from (or is gone since) the recorded one
    "env-missing",  # a variable of the environment file is absent
    "env-changed",  # a variable of the environment file has another value
    "effect-failed",  # a plan step's effect does not hold (envbuild.actions.effects): files of a
    # distribution gone or changed, local changes in a source tree, the env file edited, ...
]


class ObservedPatch(BaseModel):
    """A patch recorded under <prefix>/.envbuild/patches/ and whether the tree still has it."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    id: str
    component: str | None = None
    status: str = "recorded"  # applied | already-applied | reverted | recorded (not checkable)
    diff: str = ""
    reason: str = ""


class Extension(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore")

    path: str
    sha256: str


class Observed(BaseModel):
    """What is really installed in one environment on one node."""

    model_config = ConfigDict(defer_build=True, extra="ignore", populate_by_name=True)

    schema_: Literal["envbuild.observed/1"] = Field(OBSERVED_SCHEMA, alias="schema")
    host: str | None = None  # the node's hostname; not part of the fingerprint
    prefix: str | None = None
    python: str | None = None
    python_path: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)  # canonical name -> version
    git: dict[str, str | None] = Field(default_factory=dict)  # source name -> HEAD sha
    patches: list[ObservedPatch] = Field(default_factory=list)
    extensions: list[Extension] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)  # the environment file's variables
    env_file: str | None = None
    process_env: dict[str, str] = Field(default_factory=dict)  # NCCL_/CUDA_ in the shell

    def state(self) -> dict:
        """The part that defines the environment (no hostname): input of the fingerprint."""
        return self.model_dump(by_alias=True, exclude={"host"})


class Drift(BaseModel):
    """One difference between what the run recorded/locked and what is on the node now."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    kind: DriftKind
    subject: str  # package name, source name, patch id, .so path, variable
    expected: str | None = None
    observed: str | None = None
    host: str | None = None

    def line(self) -> str:
        return f"{self.kind}: {self.subject}: expected {self.expected or '-'}, found {self.observed or '-'}"


def parse_observed(text: str, host: str = "local") -> Observed:
    """Parse the observe script's stdout; raise EnvironmentProblem if it is not observed JSON."""
    start = text.find("{")
    try:
        data = json.loads(text[start:] if start >= 0 else text)
    except json.JSONDecodeError as exc:
        tail = text.strip().splitlines()[-1:] or ["(no output)"]
        raise EnvironmentProblem(
            f"{host}: the observe script did not print JSON ({exc.msg}); last line: {tail[0][:200]}",
            hint="run the environment's python by hand on the node; is the prefix right?",
        ) from None
    try:
        obs = Observed.model_validate(data)
    except ValidationError as exc:
        raise EnvironmentProblem(
            f"{host}: observed state does not match {OBSERVED_SCHEMA}: {exc.errors()[0]['msg']}",
            hint="the node ran another observe script version; rerun envbuild verify",
        ) from None
    return obs
