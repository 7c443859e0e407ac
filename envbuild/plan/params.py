"""Typed parameters of each plan step kind.

A step's ``params`` is one of these models; the ``kind`` field discriminates them, so a plan
read back from JSON (``Plan.model_validate_json``) gets the same types the planner produced,
and every reader (actions, renderers, observe, report) uses these fields, not guesses.

Everything a step needs on the node is decided here by the planner: absolute paths (``~``
expanded with the node's ``$HOME`` fact), the interpreter, URLs to fetch from, the smoke runs.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class _P(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Requirement(_P):
    """One pip requirement with the hashes its lock entry holds (empty: not verified)."""

    name: str
    version: str  # exact version, or a specifier when unlocked ("<0.46")
    requirement: str  # "torch==2.13.0+cpu", "wheel<0.46"
    hashes: list[str] = Field(default_factory=list)  # "sha256:..." or bare hex
    index_url: str | None = None
    find_links: str | None = None


class PreflightParams(_P):
    kind: Literal["preflight"] = "preflight"
    feasible: bool
    summary: str = ""
    errors: list[str] = Field(default_factory=list)  # violated rule ids
    warnings: list[str] = Field(default_factory=list)


class SystemPackagesParams(_P):
    kind: Literal["system_packages"] = "system_packages"
    manager: Literal["apt"] = "apt"
    packages: list[str]


class EnvironmentParams(_P):
    kind: Literal["environment"] = "environment"
    backend: Literal["venv", "conda", "container", "module-venv"]
    prefix: str
    python: str  # "3.11"
    interpreter: str  # the node's interpreter path (facts), else the name "python3.11"
    system_site_packages: bool = False
    conda_module: str | None = None
    base_image: str | None = None
    conda_channel: str | None = None
    conda_specs: list[str] = Field(default_factory=list)
    python_from: Literal["node", "conda"] = "node"
    conda_tool: str | None = None  # micromamba/mamba/conda path from facts; None: py-rattler
    helper_python: str | None = None  # conda without a conda tool: runs rattler_create.py


class PipToolingParams(_P):
    kind: Literal["pip_tooling"] = "pip_tooling"
    requirements: list[Requirement]  # locked versions with their hashes (Lock.tooling)
    find_links: list[str] = Field(default_factory=list)
    unverified: list[str] = Field(default_factory=list)  # names without a hash in the lock
    no_index: bool = False  # offline (a bundle): pip never asks an index

    @model_serializer(mode="wrap")
    def _omit_online_default(self, handler):
        # added later: left out at its default, so plans made before keep their step digests
        data = handler(self)
        if isinstance(data, dict) and not self.no_index:
            data.pop("no_index", None)
        return data


class PipInstallParams(_P):
    kind: Literal["pip_install"] = "pip_install"
    requirements: list[Requirement]
    find_links: list[str] = Field(default_factory=list)
    index_url: str | None = None
    no_index: bool = False
    env: dict[str, str] = Field(default_factory=dict)
    no_deps: bool = True  # the lock holds the whole closure: dependencies are its own entries
    no_build_isolation: list[str] = Field(default_factory=list)  # names built without isolation
    unverified: list[str] = Field(default_factory=list)  # names without a hash in the lock


class GitSourceParams(_P):
    kind: Literal["git_source"] = "git_source"
    name: str
    url: str
    fetch_url: str  # the mirror copy when one was given, else url
    ref: str
    sha: str | None
    dest: str


class PatchParams(_P):
    kind: Literal["patch"] = "patch"
    id: str
    component: str
    dest: str
    patch_kind: Literal["replace", "regex", "apex-cuda-check", "expect"]
    file: str
    old: str | None = None
    new: str | None = None
    count: int = 1
    why: str = ""
    decision: str | None = None  # apex-cuda-check: "patched" | "refused" | ...
    nvcc: str | None = None
    torch_cuda: str | None = None


class BuildParams(_P):
    kind: Literal["build"] = "build"
    name: str
    dest: str
    commands: list[str]  # the published build commands, run by bash in the tree
    env: dict[str, str] = Field(default_factory=dict)


class ApexBuildParams(_P):
    kind: Literal["apex_build"] = "apex_build"
    dest: str
    argv: list[str]  # the install command as the Apex era spells it
    wheel_argv: list[str]  # the same build, producing a wheel into wheel_dir
    env: dict[str, str]
    cache_key: str
    wheel_dir: str
    options: list[str]
    dist_name: str = "apex"


class InstallSourceParams(_P):
    kind: Literal["install_source"] = "install_source"
    name: str
    dest: str
    mode: Literal["editable", "wheel", "pth"]


class EnvFileParams(_P):
    kind: Literal["env_file"] = "env_file"
    path: str
    vars: dict[str, str]


class ImportCheckParams(_P):
    kind: Literal["import_check"] = "import_check"
    modules: list[str]


class SmokeRun(_P):
    """One program the smoke step runs; its stdout/stderr/rc land in ``<dir>/<name>.*``."""

    name: str
    script: str | None = None  # envbuild smoke script copied to the node, or None (native)
    argv: list[str]
    cwd: str
    env: dict[str, str] = Field(default_factory=dict)
    timeout: int = 1800


class SmokeParams(_P):
    kind: Literal["smoke"] = "smoke"
    kinds: list[str]
    preset: str = "tiny"
    dir: str  # <prefix>/.envbuild/smoke
    env_file: str
    runs: list[SmokeRun] = Field(default_factory=list)
    native_skip: str | None = None  # why the recipe's own benchmark does not run here


# --- an offline bundle (envbuild.bundle): what the node receives before anything installs ---


class StagedFile(_P):
    """One file of a bundle's ``node/`` folder: its path there, sha256 and size."""

    name: str  # "wheels/six-1.16.0-py2.py3-none-any.whl", "git/apex.git/HEAD"
    sha256: str
    size: int


class BundleParams(_P):
    """Copy the bundle's ``node/`` folder (unpacked on the controller at ``src``) to ``dir`` on
    the node: the wheels pip installs from (--no-index) and the shallow repositories git
    clones from. ``digest`` is the bundle file's sha256 (recorded in the report)."""

    kind: Literal["bundle"] = "bundle"
    digest: str
    src: str  # the controller's unpacked node/ folder
    dir: str = ""  # <prefix>/.envbuild/bundle on the node (set by the planner)
    files: list[StagedFile]
    git: dict[str, str] = Field(default_factory=dict)  # source URL -> "git/<name>.git" in dir


StepParams = Annotated[Union[
    PreflightParams, SystemPackagesParams, EnvironmentParams, PipToolingParams, PipInstallParams,
    GitSourceParams, PatchParams, BuildParams, ApexBuildParams, InstallSourceParams,
    EnvFileParams, ImportCheckParams, SmokeParams,
    BundleParams,
], Field(discriminator="kind")]
