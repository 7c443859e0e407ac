"""Typed parameters of each plan step kind.

A step's ``params`` is one of these models; the ``kind`` field discriminates them, so a plan
read back from JSON (``Plan.model_validate_json``) gets the same types the planner produced,
and every reader (actions, renderers, observe, report) uses these fields, not guesses.

Everything a step needs on the node is decided here by the planner: absolute paths (``~``
expanded with the node's ``$HOME`` fact), the interpreter, URLs to fetch from, the smoke runs.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from envbuild.compat.base_images import BaseImage


class _P(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)
    # fields that say where the controller keeps something, not what the node gets: left out of
    # the step's digest (envbuild.plan.model.Step.digest), so that a node's step markers do not
    # depend on which controller (which $ENVBUILD_HOME) wrote them
    DIGEST_EXCLUDE: ClassVar[frozenset[str]] = frozenset()


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
    # False: the venv is made --without-pip (ensurepip's 2-3 CPU-s) because uv installs into it
    # next the locked pip (and, where a build needs it, ensurepip's setuptools wheel), or, where
    # the recipe locks no pip, ensurepip's own wheels (PipToolingParams.seed_ensurepip); left out
    # of the data when True, so plans made before keep their step digests
    with_pip: bool = True

    @model_serializer(mode="wrap")
    def _omit_with_pip(self, handler):
        data = handler(self)
        if isinstance(data, dict) and self.with_pip:
            data.pop("with_pip", None)
        return data


Installer = Literal["pip", "uv"]


def _omit_pip(data, installer: str, uv: str | None):
    """``installer``/``uv`` were added later: left out for pip, so plans made before keep
    their step digests (and golden files)."""
    if isinstance(data, dict) and installer == "pip":
        data.pop("installer", None)
        if uv is None:
            data.pop("uv", None)
    return data


class UvToolParams(_P):
    """The controller's uv copied to ``dest`` on the node (mode 0755), checked by sha256."""

    kind: Literal["uv_tool"] = "uv_tool"
    dest: str
    version: str
    sha256: str


class PipToolingParams(_P):
    kind: Literal["pip_tooling"] = "pip_tooling"
    requirements: list[Requirement]  # locked versions with their hashes (Lock.tooling)
    find_links: list[str] = Field(default_factory=list)
    unverified: list[str] = Field(default_factory=list)  # names without a hash in the lock
    no_index: bool = False  # offline (a bundle): pip never asks an index
    installer: Installer = "pip"  # uv: ``uv pip install`` with the binary at ``uv``
    uv: str | None = None
    # True (uv only): the venv was made --without-pip where ensurepip would have brought
    # setuptools; the interpreter's own ensurepip wheel of it is installed first (SEED_ENSUREPIP)
    seed_setuptools: bool = False
    # (uv only) the venv was made --without-pip where the recipe locks no pip: what `python -m
    # venv` would have installed (ensurepip's wheels: pip, and setuptools up to Python 3.11),
    # less what pip-tooling installs at its locked version, is installed by uv from the
    # interpreter's own wheels first (SEED_ENSUREPIP); the names here
    seed_ensurepip: list[str] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_online_default(self, handler):
        # added later: left out at its default, so plans made before keep their step digests
        data = handler(self)
        if isinstance(data, dict) and not self.no_index:
            data.pop("no_index", None)
        if isinstance(data, dict) and not self.seed_setuptools:
            data.pop("seed_setuptools", None)
        if isinstance(data, dict) and not self.seed_ensurepip:
            data.pop("seed_ensurepip", None)
        return _omit_pip(data, self.installer, self.uv)


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
    installer: Installer = "pip"  # uv: ``uv pip install`` with the binary at ``uv`` (same hashes)
    uv: str | None = None

    @model_serializer(mode="wrap")
    def _omit_pip_default(self, handler):
        return _omit_pip(handler(self), self.installer, self.uv)


class GitSourceParams(_P):
    kind: Literal["git_source"] = "git_source"
    name: str
    url: str
    fetch_url: str  # the mirror copy when one was given, else url
    ref: str
    sha: str | None
    dest: str
    # submodules the build needs (Apex --fast_multihead_attn: cutlass), initialised after the
    # checkout; submodule_mirrors: URL in .gitmodules -> the mirror copy to fetch it from
    submodules: list[str] = Field(default_factory=list)
    submodule_mirrors: dict[str, str] = Field(default_factory=dict)
    without: list[str] = Field(default_factory=list)  # documents the checkout leaves out (sparse)

    @model_serializer(mode="wrap")
    def _omit_no_submodules(self, handler):
        # added later: left out when empty, so plans made before keep their step digests
        data = handler(self)
        if isinstance(data, dict):
            for key in ("submodules", "submodule_mirrors", "without"):
                if not data.get(key):
                    data.pop(key, None)
        return data


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


# a build command that installs into the environment (its site-packages, its bin/): pip or uv
# pip install, setup.py install/develop, conda install. An image's environment is written when
# the image is built, never when a container starts (envbuild.plan.image.split_data)
ENV_WRITE_RE = re.compile(r"\bpip[0-9.]*\s+(?:-\S+\s+)*install\b|\bsetup\.py\b[^;&|]*\b(?:install|develop)\b"
                          r"|\b(?:conda|mamba|micromamba)\s+(?:-\S+\s+)*install\b|\beasy_install\b")


class BuildParams(_P):
    kind: Literal["build"] = "build"
    name: str
    dest: str
    commands: list[str]  # the published build commands, run by bash in the tree
    env: dict[str, str] = Field(default_factory=dict)
    # the top-level modules the commands make (the source's ``build_provides``): an install into
    # the environment writes them over an earlier step's copies (envbuild.actions.effects)
    provides: list[str] = Field(default_factory=list)
    # what the commands write in the tree that depends only on ``cache_key``'s inputs (the
    # source's ``build_outputs``): an executor with a build cache restores them from an earlier
    # node's build before the commands run and keeps them after (envbuild.node.treecache)
    outputs: list[str] = Field(default_factory=list)
    cache_key: str | None = None

    @model_serializer(mode="wrap")
    def _omit_no_provides(self, handler):
        # added later: left out when empty, so plans made before keep their step digests
        data = handler(self)
        if isinstance(data, dict):
            for name in ("provides", "outputs", "cache_key"):
                if not data.get(name):
                    data.pop(name, None)
        return data

    def env_writer(self) -> str | None:
        """The first command that installs into the environment (``ENV_WRITE_RE``), else None.

        >>> BuildParams(name="d", dest="/t", commands=["python setup.py install"]).env_writer()
        'python setup.py install'
        """
        return next((c for c in self.commands if ENV_WRITE_RE.search(c)), None)


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


class DataFileSpec(_P):
    """One download of the recipe's ``data`` section (``envbuild.recipes.schema.DataFile``),
    decided for the node: where it goes, where it comes from, what its sha256 must be."""

    name: str
    url: str
    dest: str  # absolute path on the node, inside the component's tree
    sha256: str | None = None  # None: the first fetch's digest is recorded, later ones must match
    mirror: str | None = None  # <--data-mirror>/<file> when a data mirror was given
    decompress: Literal["xz"] | None = None


class DataParams(_P):
    """Fetch the files (mirror first, else the URL), check and record each sha256 in
    ``record_dir`` (``<name>.sha256``), unpack ``.xz`` files after the check."""

    kind: Literal["data"] = "data"
    component: str
    files: list[DataFileSpec]
    record_dir: str  # <prefix>/.envbuild/data
    tree: str | None = None  # the component's tree: every file is written inside it (no link out)


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

    DIGEST_EXCLUDE: ClassVar[frozenset[str]] = frozenset({"src", "archive"})

    kind: Literal["bundle"] = "bundle"
    digest: str
    src: str  # the controller's unpacked node/ folder
    # the controller's tar of ``files`` under ``src`` (envbuild.fsio.write_tar), made by whoever
    # made ``src``: the node receives it in one transfer, not a copy per file ("" = per file)
    archive: str = ""
    dir: str = ""  # <prefix>/.envbuild/bundle on the node (set by the planner)
    files: list[StagedFile]
    git: dict[str, str] = Field(default_factory=dict)  # source URL -> "git/<name>.git" in dir (its first pin)
    # "URL@SHA" -> "git/<name>.git": the repository of each pinned commit, so that two sources of
    # one repository at two commits (megatron-deepspeed-slurm-h100's gpt2-vocab) each clone their own
    git_commits: dict[str, str] = Field(default_factory=dict)
    # base image name -> "images/<file>.tar" in dir: a container recipe's base image as its engine
    # saved it (``bundle --image-tar``), loaded by the container backend instead of pulled
    images: dict[str, str] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _omit_no_images(self, handler):
        # added later: left out when empty, so plans made before keep their step digests
        data = handler(self)
        if isinstance(data, dict) and not self.images:
            data.pop("images", None)
        return data


# --- the container backend (envbuild.plan.container): the image is built on the node -------

CONTEXT_LABEL = "io.envbuild.context.sha256"  # given with --label at build time (not in the Dockerfile)


class Engine(_P):
    """How the node's container engine is called: its name (from the node's facts), the
    environment of every engine command (podman's CONTAINERS_STORAGE_CONF / CONTAINERS_CONF /
    TMPDIR, docker's DOCKER_HOST) and extra options of ``build`` (``--isolation chroot``,
    ``--build-arg ...``): data from ``provision --engine-env / --engine-arg``."""

    name: Literal["podman", "docker"]
    env: dict[str, str] = Field(default_factory=dict)
    build_args: list[str] = Field(default_factory=list)


class ImagePlan(_P):
    """What an image holds, planned like a node whose facts are the base image's
    (``envbuild.plan.image.image_plan``): typed data that the Dockerfile, Apptainer and CI
    renderers render (``envbuild.render``), never rendered text.

    ``plan`` is the node plan inside the image (a venv at ``/opt/envbuild/<recipe>``);
    ``tooling`` the apt packages the base image lacks for it; ``host_env`` the env file's
    variables that are the target node's (passed at run time, never baked); ``labels`` the
    image's labels; ``wheelhouse`` the locked wheels the build takes from a context folder."""

    recipe: str
    title: str  # the recipe's title (the Apptainer help)
    target: str
    gpus: bool  # the target has GPUs (the CI workflow's ``--gpus all``)
    base: BaseImage
    plan: "Plan"  # noqa: F821 -- plan.model.Plan, resolved there (ImagePlan.model_rebuild)
    tooling: "Step | None" = None  # noqa: F821 -- plan.model.Step, as above
    lock_text: str | None = None
    wheelhouse: list[str] = Field(default_factory=list)  # wheel file names the build needs
    notes: list[str] = Field(default_factory=list)  # what the image changes from the recipe
    host_env: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return self.plan.prefix

    @property
    def state(self) -> str:
        return f"{self.prefix}/.envbuild"

    @property
    def files_dir(self) -> str:
        """Where envbuild's shipped files (patch tool, specs, verify) live in the image."""
        return f"{self.state}/files"

    @property
    def feasible(self) -> bool:
        return bool(self.plan.steps[0].params.feasible)

    def env_file(self) -> "EnvFileParams | None":
        return next((s.params for s in self.plan.steps if s.kind == "env_file"), None)

    def sources(self) -> dict[str, str]:
        """``{name: sha}`` of the git sources (labels, verify)."""
        return {s.params.name: s.params.sha or s.params.ref for s in self.plan.steps
                if s.kind == "git_source"}


class ImageParams(_P):
    """Build the image on the node from its plan (``image``): the build context is rendered
    from it (``envbuild.render.steps``: the Dockerfile context ``envbuild render --format
    dockerfile`` writes), written on the node and built by its engine.

    ``context_sha256`` is the digest of what the context is made from (``envbuild.plan.image.
    context_digest``: the image plan, the locked wheels' hashes, and envbuild's code that renders
    it and the files it copies). ``wheels`` are the locked wheels taken from the node's
    ``wheelhouse`` into the context's ``wheelhouse/`` (mounted by the Dockerfile's RUN at build
    time). ``labels`` are what the built image must carry: the context digest (given to the
    engine with ``--label``) and the image plan's digest (in the Dockerfile); the step's effect
    checks them on the node."""

    kind: Literal["image"] = "image"
    engine: Engine
    tag: str
    context_dir: str
    context_sha256: str
    image: ImagePlan
    wheelhouse: str | None = None  # the node's folder holding ``wheels``
    wheels: dict[str, str] = Field(default_factory=dict)  # wheel file name -> sha256 (lock)
    labels: dict[str, str] = Field(default_factory=dict)
    # the base image as its engine saved it, in the node's copy of a bundle: loaded
    # (``<engine> load -i``) before the build, which then finds it instead of pulling it
    base_archive: str | None = None

    @model_serializer(mode="wrap")
    def _omit_no_archive(self, handler):
        # added later: left out when None, so plans made before keep their step digests
        data = handler(self)
        if isinstance(data, dict) and self.base_archive is None:
            data.pop("base_archive", None)
        return data

    @property
    def base(self) -> str:
        return self.image.base.image

    @property
    def prefix(self) -> str:
        """The environment inside the image (/opt/envbuild/<recipe>)."""
        return self.image.prefix

    @property
    def env_file(self) -> str | None:
        """The env file inside the image."""
        ef = self.image.env_file()
        return ef.path if ef is not None else None

    @property
    def sources(self) -> dict[str, str]:
        """Source name -> its tree inside the image."""
        return {s.params.name: s.params.dest for s in self.image.plan.steps if s.kind == "git_source"}


class ImageImportParams(_P):
    """``enroot import`` of the built image into ``path`` (a squashfs that
    ``srun --container-image`` takes, for Slurm with pyxis)."""

    kind: Literal["image_import"] = "image_import"
    engine: Engine
    tag: str
    path: str
    context_sha256: str  # the image imported: a rebuilt image is imported again


class ImageCheckParams(_P):
    """The import check inside the image (``argv``: its verify script, which imports
    ``modules`` and checks the locked versions); stdout/stderr/rc kept in ``dir``."""

    kind: Literal["image_check"] = "image_check"
    engine: Engine
    tag: str
    context_sha256: str
    modules: list[str]
    argv: list[str]
    dir: str  # on the node
    name: str = "import-check"
    gpus: bool = False


class ImageSmokeParams(_P):
    """The smoke runs inside the image; the node's ``dir`` (scripts and outputs) is mounted at
    ``image_dir``, where the runs (planned for the image) expect it."""

    kind: Literal["image_smoke"] = "image_smoke"
    engine: Engine
    tag: str
    context_sha256: str
    kinds: list[str]
    preset: str = "tiny"
    dir: str  # on the node
    image_dir: str
    runs: list[SmokeRun] = Field(default_factory=list)
    native_skip: str | None = None
    gpus: bool = False
    shm_size: str | None = None


StepParams = Annotated[Union[
    PreflightParams, SystemPackagesParams, EnvironmentParams, UvToolParams, PipToolingParams,
    PipInstallParams,
    GitSourceParams, PatchParams, BuildParams, ApexBuildParams, InstallSourceParams,
    EnvFileParams, ImportCheckParams, SmokeParams,
    ImageParams, ImageImportParams, ImageCheckParams, ImageSmokeParams,
    BundleParams, DataParams,
], Field(discriminator="kind")]
