"""The plan: the ordered steps a provision runs on one node, as pure data.

A plan is a function of (recipe, lock, target, node facts, options). Renderers turn it into
Ansible variables (``envbuild.render.ansible``), later a Dockerfile, an Apptainer definition
or a scheduler script; executors run it. Nothing here touches a host.

Each step has a stable ``id`` and a ``digest`` over its parameters: an executor records the
digest of every finished step on the node, so a second provision skips unchanged steps and a
killed one resumes at the first unfinished step.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from envbuild.fsio import canonical_json, sha256_text
from envbuild.plan.params import (
    ApexBuildParams,
    BuildParams,
    DataParams,
    EnvFileParams,
    EnvironmentParams,
    GitSourceParams,
    ImageImportParams,
    ImageParams,
    ImagePlan,
    ImageSmokeParams,
    ImportCheckParams,
    PatchParams,
    PipInstallParams,
    PipToolingParams,
    PreflightParams,
    SmokeParams,
    StepParams,
)

PLAN_SCHEMA = "envbuild.plan/2"

StepKind = Literal[
    "preflight",  # refuse an infeasible node before anything is installed
    "system_packages",  # apt packages
    "environment",  # create venv / conda prefix / (container: the image)
    "uv_tool",  # push the controller's uv to the node (envbuild.plan.installer)
    "pip_tooling",  # pin pip/setuptools/wheel in the environment
    "pip_install",  # pip install a lock section, hash-checked
    "git_source",  # clone/fetch at a full SHA and verify it
    "patch",  # apply one declarative patch
    "build",  # published build commands run in a source tree
    "apex_build",  # CUDA-aware Apex wheel build + install
    "install_source",  # editable / wheel / pth install of a source tree
    "env_file",  # write the environment file
    "import_check",  # import modules with the env's python
    "smoke",  # run the smoke benchmark
    "image",  # container backend: build the image on the node (envbuild.plan.container)
    "image_import",  # container backend: enroot import for pyxis
    "image_check",  # container backend: the import check inside the image
    "image_smoke",  # container backend: the smoke runs inside the image
    "bundle",  # offline: copy the bundle's wheels and commits to the node (envbuild.bundle)
    "data",  # the recipe's downloads into a source tree, sha256-checked (envbuild.plan.data)
]


class Step(BaseModel):
    """One idempotent unit of work on a node; ``params`` is the typed model of its kind
    (``envbuild.plan.params``)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    id: str  # stable, unique in the plan, e.g. "git:megatron"
    kind: StepKind = "preflight"  # always params.kind (set by the validator)
    title: str  # one line a person reads in progress output
    params: StepParams
    reason: str = ""  # why this step exists / why this decision

    @model_validator(mode="before")
    @classmethod
    def _kind_from_params(cls, data: Any) -> Any:
        if isinstance(data, dict):
            params = data.get("params")
            pkind = params.get("kind") if isinstance(params, dict) else getattr(params, "kind", None)
            if data.get("kind") not in (None, pkind):
                raise ValueError(f"step kind {data.get('kind')!r} does not match its params ({pkind!r})")
            data = {**data, "kind": pkind}
        return data

    @property
    def digest(self) -> str:
        payload = canonical_json({"id": self.id, "kind": self.kind,
                                  "params": self.params.model_dump(mode="json", exclude=set(self.params.DIGEST_EXCLUDE))})
        return sha256_text(payload)[:16]


P_co = TypeVar("P_co", covariant=True)


class StepOf(Protocol[P_co]):
    """A plan ``Step`` whose ``params`` are known to be a ``P_co``: what ``Plan``'s accessors
    return (the steps themselves, with their params typed for the question asked)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> StepKind: ...
    @property
    def title(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def params(self) -> P_co: ...
    @property
    def digest(self) -> str: ...


class Decision(BaseModel):
    """A choice the planner made from facts (patch applied or not, torch variant, ...)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    subject: str  # "apex-cuda-check", "torch-variant", ...
    outcome: str  # "patched", "unchanged", "refused", "cu113", ...
    reason: str
    source: str | None = None


class Plan(BaseModel):
    """Everything one node needs, in order."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["envbuild.plan/2"] = Field(PLAN_SCHEMA, alias="schema")
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

    # --- the questions asked of a plan, by type (issue 55: no one outside plan/ and actions/
    # scans the steps for a kind string; tests/house/test_plan_kind_strings.py keeps it so) --------

    def _of(self, *types: type) -> list[Any]:
        """The steps whose params are one of ``types``, in plan order."""
        return [s for s in self.steps if isinstance(s.params, types)]

    def _one(self, *types: type) -> Any:
        return next(iter(self._of(*types)), None)

    def preflight(self) -> StepOf[PreflightParams] | None:
        """The preflight verdict: the plan's first step, when it is one (the planner puts it first)."""
        first: Any = self.steps[0] if self.steps else None
        return first if first is not None and isinstance(first.params, PreflightParams) else None

    def environment(self) -> StepOf[EnvironmentParams] | None:
        """The step that makes the environment (a venv, a conda prefix, a container's base)."""
        return self._one(EnvironmentParams)

    def requirement_installs(self) -> list[StepOf[PipToolingParams | PipInstallParams]]:
        """Every step that installs locked requirements: the pip tooling and the lock's sections."""
        return self._of(PipToolingParams, PipInstallParams)

    def pip_installs(self) -> list[StepOf[PipInstallParams]]:
        """The lock's sections, one pip install each (not the pip tooling)."""
        return self._of(PipInstallParams)

    def unverified(self) -> list[str]:
        """The names the plan installs without a hash in the lock (each allowed by
        ``--allow-unverified``), sorted, each once."""
        return sorted({n for s in self.requirement_installs() for n in s.params.unverified})

    def sources(self) -> list[StepOf[GitSourceParams]]:
        """The git sources the plan checks out, in plan order."""
        return self._of(GitSourceParams)

    def source(self, name: str) -> StepOf[GitSourceParams]:
        """The git source ``name``; KeyError when the plan checks out none of that name."""
        found = next((s for s in self.sources() if s.params.name == name), None)
        if found is None:
            raise KeyError(f"the plan checks out no source {name!r}")
        return found

    def patches(self) -> list[StepOf[PatchParams]]:
        """The declarative patches, in the order they apply."""
        return self._of(PatchParams)

    def builds(self) -> list[StepOf[BuildParams]]:
        """The published build commands run in a source tree."""
        return self._of(BuildParams)

    def apex_builds(self) -> list[StepOf[ApexBuildParams]]:
        """The CUDA-aware Apex wheel builds (one per Apex source)."""
        return self._of(ApexBuildParams)

    def cached_builds(self) -> list[StepOf[ApexBuildParams] | StepOf[BuildParams]]:
        """The steps whose product the controller's build cache keeps per ``cache_key``: the Apex
        wheel builds and the build commands with in-tree outputs (``BuildParams.outputs``)."""
        return [s for s in self.steps
                if isinstance(s.params, ApexBuildParams) or (isinstance(s.params, BuildParams) and s.params.cache_key)]

    def downloads(self) -> list[StepOf[DataParams]]:
        """The recipe's data downloads, one step per source tree."""
        return self._of(DataParams)

    def env_file(self) -> StepOf[EnvFileParams] | None:
        """The step that writes the environment file; None for a container node's plan (its
        image holds the env file: ``image()``)."""
        return self._one(EnvFileParams)

    def import_check(self) -> StepOf[ImportCheckParams] | None:
        return self._one(ImportCheckParams)

    def smoke(self) -> StepOf[SmokeParams] | None:
        """The smoke runs in the environment; None with ``--no-smoke`` or on a container node
        (``image_smoke()``)."""
        return self._one(SmokeParams)

    def image(self) -> StepOf[ImageParams] | None:
        """A container node's image build, with the image's own plan (``params.image.plan``)."""
        return self._one(ImageParams)

    def image_import(self) -> StepOf[ImageImportParams] | None:
        """A container node's ``enroot import`` of its image (Slurm with pyxis)."""
        return self._one(ImageImportParams)

    def image_smoke(self) -> StepOf[ImageSmokeParams] | None:
        """A container node's smoke runs inside its image."""
        return self._one(ImageSmokeParams)

    def refused(self) -> list[Decision]:
        """The decisions that refuse a step the recipe needs (outcome ``refused``: an Apex CUDA
        check that cannot pass here; a container node's plan carries its image plan's
        decisions): a provision of this plan would stop there, so ``envbuild plan`` and
        ``envbuild render`` exit 1 for them, as for an infeasible preflight."""
        return [d for d in self.decisions if d.outcome == "refused"]

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


# an image step nests the image's own plan (envbuild.plan.params.ImagePlan): its "Plan" and
# "Step" are the models above, named there by name (params is below this module)
ImagePlan.model_rebuild(_types_namespace={"Plan": Plan, "Step": Step})
