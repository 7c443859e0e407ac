"""The recipe schema: one published setup as pinned, sourced, declarative data.

A recipe says *what* must be installed, from where, and why; never *how* on a given node
(that is the plan's job). Every pin carries its source and a reason. Every place where the
published instructions cannot work as written is a ``deviation``. Patches are data
(``patches``), applied by ``envbuild.patches``.

Example (abridged)::

    schema: 1
    name: cpu-reference
    title: Small GPT on CPU torch
    python: "3.11"
    environment: {kind: venv}
    packages:
      - {name: torch, version: "2.13.0", why: "CPU wheel; smoke benchmark"}
    sources:
      - name: nanogpt
        url: https://github.com/example/nanogpt
        ref: main
        sha: 0123456789abcdef0123456789abcdef01234567
        install: pth
        why: "the GPT stack under test"
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import (BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_serializer,
                      model_validator)

from envbuild.names import EnvName, EnvValue, Name
from envbuild.recipes import logspec
from envbuild.recipes.logspec import LogSpec

SHA_RE = re.compile(r"^[0-9a-f]{40}$")


# a number a verdict is computed from: NaN and the infinities are refused where the file is read
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class Strict(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


def omit_unset(data: object, defaults: dict) -> object:
    """Drop fields still at their default from a dump, so that a field added to the schema
    leaves the digest of every recipe that does not use it (and so its lock) unchanged."""
    if isinstance(data, dict):
        for key, default in defaults.items():
            if key in data and data[key] == default:
                data.pop(key)
    return data


def check_version_spec(value: str) -> str:
    """``value`` when it is a PEP 440 version ("1.8.2"), specifier (">=1.2,<2") or "*"."""
    if value == "*":
        return value
    try:
        Version(value)
        return value
    except InvalidVersion:
        pass
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(f"{value!r} is neither a PEP 440 version (1.8.2) nor a specifier "
                         "(>=1.2,<2), nor '*'") from None
    return value


class Source(Strict):
    """Where a fact comes from: a URL (page, issue, file) plus optional ref/commit."""

    url: str
    ref: str | None = None
    sha: str | None = None
    note: str | None = None


def no_credentials(url: str) -> str:
    """``url`` when it holds no credential (``envbuild.redact.url_credentials``): a recipe's URLs
    are stored in locks, bundles and run folders and shown on command lines."""
    from envbuild.redact import Redactor, url_credentials

    found = url_credentials(url)
    if found:
        raise ValueError(f"{Redactor({}).text(url)} holds {found}: give credentials through ~/.netrc, a keyring "
                         "or the environment at run time, never in a recipe")
    return url


class Package(Strict):
    """A Python package installed with pip.

    ``version`` is an exact version ("1.8.2") or a PEP 440 specifier (">=1.2,<2"); the
    lock turns specifiers into exact versions with hashes. ``index`` names where the
    distribution lives when it is not PyPI (e.g. the PyTorch LTS find-links page).
    ``cuda``: for CUDA-variant wheels (torch): ``"cu111"``, ``"cpu"`` or ``"auto"`` (chosen
    from the node's CUDA by the compatibility table).
    """

    name: str
    version: str
    why: str
    index: str | None = None
    index_kind: Literal["pypi", "find-links", "index-url"] = "pypi"
    cuda: str | None = None
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)  # install-time env (e.g. sklearn brownout)
    source: Source | None = None
    preinstalled: bool = False  # provided by the base image / module, verified not installed
    build_isolation: bool = True  # False: pip --no-build-isolation (sdists that import torch)

    @field_validator("version")
    @classmethod
    def _pep440(cls, v: str) -> str:
        return check_version_spec(v)

    @field_validator("index")
    @classmethod
    def _index(cls, v: str | None) -> str | None:
        return no_credentials(v) if v else v


class Patch(Strict):
    """A declarative change to a source tree.

    kinds:
      * ``replace``: replace ``old`` by ``new`` in ``file`` (literal); idempotent: when ``new``
        is already present and ``old`` is absent the patch is "already applied".
      * ``regex``: like replace, ``old`` is a Python regex, ``count`` expected matches (0 = any).
      * ``apex-cuda-check``: neutralize Apex's CUDA-vs-torch check according to the node's nvcc
        and the torch wheel's CUDA (same major: relax; equal: unchanged; other major: refuse).
      * ``expect``: assert that ``file`` contains ``new`` (documents a state a fork already has).
    ``new`` may use ``{facts.<name>}`` / ``{inventory.<name>}`` placeholders filled at plan time.
    """

    id: str
    kind: Literal["replace", "regex", "apex-cuda-check", "expect"]
    component: str
    file: str = "setup.py"
    old: str | None = None
    new: str | None = None
    count: int = 1
    why: str
    source: Source | None = None
    when: str | None = None  # e.g. "pipeline_parallel > 1" (documentation only)

    @field_validator("file")
    @classmethod
    def _inside_tree(cls, v: str) -> str:
        parts = v.replace("\\", "/").split("/")
        if not v or v.startswith("/") or ".." in parts:
            raise ValueError(f"file must be a path inside the source tree, got {v!r}")
        return v

    @model_validator(mode="after")
    def _needs_text(self) -> "Patch":
        if self.kind in ("replace", "regex") and (self.old is None or self.new is None):
            raise ValueError(f"patch kind {self.kind!r} needs both 'old' and 'new'")
        if self.kind == "expect" and self.new is None:
            raise ValueError("patch kind 'expect' needs 'new' (the text that must be present)")
        return self


# where git may fetch a source from: a URL of a known scheme, scp-like user@host:path, or an
# absolute local path; never something git would read as an option ("--upload-pack=...")
GIT_URL_RE = re.compile(r"^(?:(?:https?|ssh|git|file)://[^\s]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s-][^\s]*|/[^\s]*)$")


class GitSource(Strict):
    """A git component pinned to a full SHA.

    ``install``: ``editable`` (pip -e), ``wheel`` (pip install ., non-editable), ``pth`` (a .pth
    entry on the source dir, for trees without setup.py), ``apex`` (CUDA-aware Apex build),
    ``none`` (clone only: scripts, data tools).
    """

    name: Name  # becomes a path on the node (<prefix>/src/<name>)
    url: str
    ref: str
    sha: str | None = None  # None only with ``unverified: <reason>``
    unverified: str | None = None
    requires_ancestors: list[str] = Field(default_factory=list)
    install: Literal["editable", "wheel", "pth", "apex", "none"] = "editable"
    build: list[str] = Field(default_factory=list)  # commands run in the tree after patches
    # what the build commands need of the recipe's base image beyond its Python packages (its
    # system libraries, its CUDA toolkit), said when they run only inside that image; a node
    # without it (a CPU import proof over a stand-in of the image's packages) leaves the build
    # out, named with this reason (envbuild.testbed.importproof)
    build_needs_image: str | None = None
    # the Python modules the build commands make (an extension such as shm_tensor_new_rdma)
    build_provides: list[str] = Field(default_factory=list)
    # what the build commands write inside the tree (folders or files, relative to it) that
    # depends only on the build's inputs (source commit and patches, commands, torch, CUDA, archs,
    # Python, the tree's path): built once per such key, kept in the controller's build cache,
    # carried by bundles and restored before the commands run on the next node, which then find
    # them up to date (envbuild.node.treecache). Example: [megatron/fused_kernels/build]
    build_outputs: list[str] = Field(default_factory=list)
    build_options: list[str] = Field(default_factory=list)  # e.g. Apex --cpp_ext --cuda_ext
    # files of the pinned commit its checkout leaves out: documents a git mirror's snapshot
    # lacks (metaseq's OPT logbook PDFs), so a bundle cannot carry them; never code (the node
    # checks the tree out sparse, without them; envbuild.bundle.gitpack, envbuild.node.actions)
    without: list[str] = Field(default_factory=list)
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    # where the lock reads what this source depends on (envbuild.lock.srcdeps), at its SHA:
    # metadata (pyproject / setup.py / the requirements.txt setup.py reads), requirements
    # (requirements.txt, which its instructions pip install -r), none. Default: metadata for
    # editable and wheel installs, none otherwise.
    dependencies: Literal["metadata", "requirements", "none"] | None = None
    # the requirements files the lock reads in ``requirements`` mode, paths inside the tree
    # (default: requirements.txt). Naming one (DeeperSpeed's requirements/requirements.txt,
    # which its setup.py reads through a function) implies ``dependencies: requirements``.
    # Example: requirements: [requirements/requirements.txt]
    requirements: list[str] = Field(default_factory=list)
    # the sources whose steps come before this one's (envbuild.recipes.order): by default the
    # order of ``sources:``. Example: after: [deeperspeed] (its data preparation imports it)
    after: list[Name] = Field(default_factory=list)
    why: str
    source: Source | None = None

    @field_validator("requirements", "build_outputs")
    @classmethod
    def _paths_inside(cls, v: list[str], info: ValidationInfo) -> list[str]:
        example = {"requirements": "requirements/requirements.txt",
                   "build_outputs": "megatron/fused_kernels/build"}[info.field_name or ""]
        for path in v:
            parts = path.split("/")
            if (not path.strip() or path.startswith("/") or "\\" in path or ".." in parts or "" in parts
                    or "." in parts or parts[0] == ".git"):
                raise ValueError(f"{info.field_name} entries are paths inside the source tree "
                                 f"({example}), got {path!r}")
        return v

    @field_validator("url")
    @classmethod
    def _git_url(cls, v: str) -> str:
        if not GIT_URL_RE.match(v):
            raise ValueError(f"url must be an https://, ssh://, git://, file:// URL, user@host:path or an "
                             f"absolute path, got {v!r}")
        return no_credentials(v)

    @field_validator("ref")
    @classmethod
    def _git_ref(cls, v: str) -> str:
        if v.startswith("-") or not v.strip():
            raise ValueError(f"ref must be a branch, tag or commit name, got {v!r}")
        return v

    @field_validator("sha")
    @classmethod
    def _full_sha(cls, v: str | None) -> str | None:
        if v is not None and not SHA_RE.match(v):
            raise ValueError(f"sha must be a full 40-hex commit, got {v!r}")
        return v

    @field_validator("requires_ancestors")
    @classmethod
    def _full_ancestors(cls, v: list[str]) -> list[str]:
        for sha in v:
            if not SHA_RE.match(sha):
                raise ValueError(f"requires_ancestors entries must be full SHAs, got {sha!r}")
        return v

    @model_validator(mode="after")
    def _pinned(self) -> "GitSource":
        if self.sha is None and not self.unverified:
            raise ValueError("a git source needs 'sha' (full commit) or 'unverified: <why>'")
        if self.requirements and self.dependencies not in (None, "requirements"):
            raise ValueError(f"source {self.name!r}: requirements names the files read with "
                             f"dependencies: requirements, not {self.dependencies!r}")
        if (self.build_needs_image or self.build_provides or self.build_outputs) and not self.build:
            raise ValueError(f"source {self.name!r}: build_needs_image, build_provides and build_outputs "
                             "describe its build commands, and it has none ('build')")
        return self

    @model_serializer(mode="wrap")
    def _omit_new(self, handler):  # noqa: ANN001, ANN202
        return omit_unset(handler(self), {"build_needs_image": None, "build_provides": [], "build_outputs": [],
                                          "without": [],
                                          "requirements": [], "after": []})

    @field_validator("without")
    @classmethod
    def _documents_only(cls, v: list[str]) -> list[str]:
        for path in v:
            parts = path.split("/")
            if not path or path.startswith("/") or ".." in parts or any(c in path for c in "*?[!\\"):
                raise ValueError(f"without entries are plain paths inside the tree, got {path!r}")
            if Path(path).suffix.lower() not in DOCUMENTS:
                raise ValueError(f"without: {path!r} may be code or data; only documents "
                                 f"({', '.join(sorted(DOCUMENTS))}) may be left out of a checkout")
        return v


# what a checkout may leave out (GitSource.without): read by no import and no build
DOCUMENTS = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".mp4", ".mov",
                       ".pptx", ".docx", ".xlsx"})


class EntryScript(Strict):
    """A Python program the setup's launch commands run, read for its imports.

    Example::

        entry_scripts:
          - component: metaseq
            path: metaseq_cli/train.py
            why: "opt-baselines --local runs it in a subprocess"
    """

    component: Name  # one of sources[].name
    path: str  # relative to the component's tree
    why: str = ""


class Environment(Strict):
    """Where the packages go. ``source`` cites where the base image, the module or the pip /
    setuptools pins are stated (at the revision read)."""

    kind: Literal["venv", "conda", "container", "module-venv"] = "venv"
    system_site_packages: bool = False
    conda_module: str | None = None  # e.g. conda/2023-10-04 (Polaris)
    base_image: str | None = None  # e.g. nvcr.io/nvidia/pytorch:23.04-py3
    pip: str | None = None  # pip version spec for the env, e.g. "<23.1"
    setuptools: str | None = None
    source: Source | None = None

    @model_serializer(mode="wrap")
    def _omit_new(self, handler):  # noqa: ANN001, ANN202
        return omit_unset(handler(self), {"source": None})


CODE_REF_RE = re.compile(r"^envbuild(?:\.[a-z_][a-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
# a deviation the recipe handles itself with one of its own patches: ``patch:<patch id>``
OWN_PATCH_RE = re.compile(r"^patch:([A-Za-z0-9][A-Za-z0-9_.-]*)$")
TEST_REF_RE = re.compile(r"^tests/[A-Za-z0-9_/]+\.py::[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]+\])?$")


class Deviation(Strict):
    """A place where the published instructions cannot work as written.

    A deviation is a claim about what envbuild does (``instead``), so it names the code that
    does it and the tests that fail when that behaviour goes:

    * ``handled_by``: ``envbuild.module:function`` (or a class/constant), one or more;
    * ``test``: ``tests/<layer>/test_x.py::test_y`` (pytest node ids), one or more;
    * or ``handled_by: [patch:<id>]``: the recipe handles it itself with patches it carries
      (``patches:``, each applied and checked on the node by the patch step, which records
      applied / already-applied / missing); no envbuild code or test is named, and it is not open;
    * ``status: open``: envbuild cannot carry it out yet; ``instead`` says what is missing and
      the report shows the deviation as open ("not handled yet").

    ``tests/recipes/test_deviations.py`` imports every ``handled_by`` and collects every ``test`` of
    the shipped recipes, and refuses a deviation that is neither handled nor open.

    Example::

        - id: legacy-vocab-urls
          published: "wget .../gpt2-vocab.json"
          problem: "not checksummed"
          instead: "the data step checks each file's sha256"
          handled_by: [envbuild.plan.data:data_steps]
          test: [tests/plan/test_data_step.py::test_mismatch_is_refused]
    """

    id: str
    published: str  # what the instructions say
    problem: str  # why it cannot work
    instead: str  # what envbuild does
    source: Source | None = None
    status: Literal["handled", "open"] | None = None  # None: handled when code and test are named
    handled_by: list[str] = Field(default_factory=list)
    test: list[str] = Field(default_factory=list)

    @field_validator("handled_by", "test", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("handled_by")
    @classmethod
    def _code_refs(cls, v: list[str]) -> list[str]:
        for ref in v:
            if not (CODE_REF_RE.match(ref) or OWN_PATCH_RE.match(ref)):
                raise ValueError(f"handled_by entries are envbuild.module:function or patch:<the recipe's patch "
                                 f"id>, got {ref!r}")
        return v

    @field_validator("test")
    @classmethod
    def _test_refs(cls, v: list[str]) -> list[str]:
        for ref in v:
            if not TEST_REF_RE.match(ref):
                raise ValueError(f"test entries are tests/<layer>/test_x.py::test_y, got {ref!r}")
        return v

    @model_validator(mode="after")
    def _claim_or_open(self) -> "Deviation":
        if self.status == "handled" and not (self.handled_by and self.test):
            raise ValueError("a deviation with status 'handled' names handled_by and test")
        return self

    @property
    def state(self) -> str:
        """``handled`` (code and test named), ``open`` (not handled yet) or ``unverified``
        (a claim that names no code: refused for shipped recipes by tests/recipes/test_deviations.py)."""
        return deviation_state(self.model_dump())

    @model_serializer(mode="wrap")
    def _omit_new(self, handler):  # noqa: ANN001, ANN202
        return omit_unset(handler(self), {"status": None, "handled_by": [], "test": []})


def deviation_state(data: dict) -> str:
    """The state of a deviation given as data (a recipe's, or one read from a run directory):
    handled when it names envbuild's code and tests, or only patches of its recipe (``patch:<id>``,
    checked against the recipe's ``patches`` when it loads)."""
    if data.get("status") == "open":
        return "open"
    refs = data.get("handled_by") or []
    if refs and all(isinstance(r, str) and OWN_PATCH_RE.match(r) for r in refs):
        return "handled"
    return "handled" if refs and data.get("test") else "unverified"


class Erratum(Strict):
    """A step of the published instructions that fails as written, shown by the published
    sources themselves (not by a node): recorded on the published setup's recipe, with the
    test that fails when it stops being true and, where a shipped variant corrects it, that
    variant's deviation (``<recipe>:<deviation id>``). Says nothing of what is installed, so
    it is not part of the digest a lock records.

    Example::

        errata:
          - id: args-suite-undefined
            published: "python benchmark_gpt.py --nproc_per_node N (N with no case in the suite)"
            problem: "the KeyError branch prints args.suite, which the parser never defines"
            source: {url: "https://github.com/alpa-projects/alpa/blob/e0ae8bf8.../benchmark_gpt.py#L33"}
            corrected_by: [alpa-megatron-h100:args-suite-undefined]
            test: [tests/recipes/test_errata.py::test_alpa_args_suite_is_undefined]
    """

    id: str
    published: str  # the step as written
    problem: str  # why it fails as written, with what shows it
    source: Source  # where the step is written (the page or file, at its commit)
    shown_by: Source | None = None  # where it is shown to fail, when not in ``source`` itself
    corrected_by: list[str] = Field(default_factory=list)  # "<recipe>:<deviation id>"
    test: list[str] = Field(min_length=1)

    @field_validator("corrected_by")
    @classmethod
    def _deviation_refs(cls, v: list[str]) -> list[str]:
        for ref in v:
            if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*", ref):
                raise ValueError(f"corrected_by entries are <recipe>:<deviation id>, got {ref!r}")
        return v

    @field_validator("test")
    @classmethod
    def _test_refs(cls, v: list[str]) -> list[str]:
        for ref in v:
            if not TEST_REF_RE.match(ref):
                raise ValueError(f"test entries are tests/<layer>/test_x.py::test_y, got {ref!r}")
        return v


class DataFile(Strict):
    """A file the published instructions download (vocabulary, merges, a dataset), fetched by
    the plan's data step into the tree of ``component`` at ``path``: from ``--data-mirror DIR``
    (``DIR/<file>``) when given, else from ``url``; its sha256 is checked against ``sha256``
    and recorded on the node (``<prefix>/.envbuild/data/<name>.sha256``). Without a known
    ``sha256`` (``unverified: <why>``) the first fetch's digest is recorded and every later
    fetch must match it. ``decompress: xz`` unpacks ``<path>`` to ``<path>`` without ``.xz``
    after the check.

    Example::

        data:
          - name: gpt2-vocab
            url: https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-vocab.json
            component: megatron-deepspeed
            path: gpt2-vocab.json
            sha256: null
            unverified: "not fetched from here"
            why: "the README's vocabulary"
    """

    name: Name
    url: str
    component: str
    path: str
    file: str | None = None  # the name in a data mirror; default: the URL's last path segment
    sha256: str | None = None
    unverified: str | None = None
    decompress: Literal["xz"] | None = None
    why: str
    source: Source | None = None

    @field_validator("path")
    @classmethod
    def _inside_tree(cls, v: str) -> str:
        parts = v.replace("\\", "/").split("/")
        if not v or v.startswith("/") or ".." in parts:
            raise ValueError(f"path must be a path inside the source tree, got {v!r}")
        return v

    @field_validator("sha256")
    @classmethod
    def _hex(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-f]{64}", v):
            raise ValueError(f"sha256 must be 64 lower-case hex digits, got {v!r}")
        return v

    @field_validator("url")
    @classmethod
    def _remote(cls, v: str) -> str:
        # a recipe reads only what it names on the network: file:// (or any other scheme) would
        # pack a file of the controller into a bundle or read one on the node
        if not re.match(r"https?://[^/\s]+/", v) or any(ord(c) < 33 or ord(c) == 127 for c in v):
            raise ValueError(f"url must be an http(s) address, got {v!r}")
        return no_credentials(v)

    @model_validator(mode="after")
    def _checked(self) -> "DataFile":
        mirror = self.mirror_name
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._+-]*", mirror):
            raise ValueError(f"the file's name in a data mirror must be one plain file name, got {mirror!r} "
                             "(set 'file')")
        if self.sha256 is None and not self.unverified:
            raise ValueError("a data file needs 'sha256' or 'unverified: <why>'")
        if self.decompress == "xz" and not self.path.endswith(".xz"):
            raise ValueError("decompress: xz needs a path ending in .xz")
        return self

    @property
    def mirror_name(self) -> str:
        """The file's name in a data mirror folder."""
        from urllib.parse import urlparse

        return self.file or urlparse(self.url).path.rstrip("/").rsplit("/", 1)[-1] or self.name


class PublishedFigure(Strict):
    """The number the published instructions report for the benchmark's metric, and where."""

    value: FiniteFloat
    source: str  # URL (paper, README, issue), or a citation with the table/figure
    # the GPU the figure was measured on, as nvidia-smi names it ("Tesla V100-SXM2-16GB"), and
    # how many: a run is compared with the figure only on the same model (envbuild.smoke.hardware)
    gpu: str | None = None
    gpus: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _count_has_model(self) -> "PublishedFigure":
        if self.gpus is not None and not self.gpu:
            raise ValueError("published.gpus needs published.gpu (the model the figure was measured on)")
        return self

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):  # noqa: ANN001, ANN202
        return omit_unset(handler(self), {"gpu": None, "gpus": None})  # older recipes' digests unchanged


class Window(Strict):
    """Which of the benchmark's logged values are measured (``envbuild.smoke.judge``): the
    first ``warmup`` logged values (start-up, compilation, the first all-reduce) are left out,
    the rest is the window whose spread (n, median, min, max) a verdict gives. ``what`` says
    what one logged value covers, with the source that prints it."""

    warmup: int = Field(ge=0)
    what: str = Field(min_length=1)


# a folder a benchmark leaves behind, named relative to its working directory: plain names
# only (no "..", no absolute path, nothing a shell or rm would read as an option or a pattern)
FRESH_PATH_RE = re.compile(r"^(?!-)[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*$")


class FreshFolder(Strict):
    """A folder the benchmark writes that its next run would read back: a checkpoint folder the
    program resumes from. The smoke step removes it before each run of the benchmark, so every
    run measures the published work from its start, never a resumption of the one before.

    Example::

        fresh:
          - path: checkpoints
            why: "metaseq restores <save_dir>/checkpoint_last.pt when it exists"
            source: {url: "https://github.com/facebookresearch/metaseq/blob/4de251ff/metaseq/checkpoint_utils.py#L175"}
    """

    path: str  # relative to the benchmark's working directory
    why: str = Field(min_length=1)
    source: Source

    @field_validator("path")
    @classmethod
    def _inside_cwd(cls, v: str) -> str:
        if not FRESH_PATH_RE.match(v) or any(part in (".", "..") for part in v.split("/")):
            raise ValueError(f"path must name a folder inside the benchmark's working directory "
                             f"(letters, digits, '_', '.', '-', '/'; no '..'), got {v!r}")
        return v


class Benchmark(Strict):
    """The recipe's native benchmark and its pass threshold.

    ``cwd`` and ``env`` values may name a source checkout as ``{sources.<name>}`` (filled at
    plan time). ``target_env`` lists variables the run needs from the target profile's ``env``
    (e.g. the Azure NCCL/UCX set), so node-type knowledge stays on the target. ``variants``
    are further published commands (multi-node, other GPU counts), keyed by a short name.

    Example::

        benchmark:
          command: python benchmark_gpt.py --nproc_per_node 1
          cwd: "{sources.alpa}/osdi22_artifact/megatron"
          parser: megatron-pretrain
          metric: tflops
          published: {value: 47.5, source: "https://www.usenix.org/conference/osdi22/presentation/zheng-lianmin"}

    ``published`` (optional) is the figure the report plots the measured value against;
    ``source`` (optional) cites where the command and the threshold are stated.

    ``threshold_gpu`` / ``threshold_gpus``: the GPU model (as nvidia-smi names it) and count
    the threshold was measured on. It is applied only to a run on that model (per GPU when the
    counts differ and the metric is a whole job's); a run on another model is NOT JUDGED. A
    threshold without ``threshold_gpu`` holds on any hardware (a same-hardware ratio such as
    cpu-reference's MFU). ``per_gpu``: the metric is already per GPU (TFLOPS per GPU), so GPU
    counts are not divided out. ``same_gpu_count``: the benchmark runs another workload on
    another number of GPUs (Alpa's suite picks the model by GPU count), so its figure is compared
    only with a threshold, reference or published figure measured on as many GPUs.
    ``window``: the measured window (``Window``).
    ``timeout_s``: the wall-clock bound of the smoke step's run of the command (GNU ``timeout``
    around it, ``envbuild.plan.smoke.native_run``): a run that hangs ends as a failure (exit
    124) with the output it wrote so far captured and judged; unset, the step's own bound.
    ``fresh``: folders the command leaves behind that its next run would resume from
    (``FreshFolder``), removed before each run.
    """

    command: str
    cwd: str | None = None  # working directory, e.g. "{sources.metaseq}"
    target_env: list[EnvName] = Field(default_factory=list)  # names taken from Target.env
    variants: dict[str, str] = Field(default_factory=dict)  # name -> alternative command
    parser: str  # a built-in reader, one registered under envbuild.parsers, or "declared" (log:)
    metric: str
    threshold: FiniteFloat | None = None  # .nan / .inf refused: a verdict against them means nothing
    unit: str = ""
    higher_is_better: bool = True
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    needs_gpus: int = 0
    why: str = ""
    published: PublishedFigure | None = None
    source: Source | None = None
    threshold_gpu: str | None = None
    threshold_gpus: int | None = Field(default=None, ge=1)
    per_gpu: bool = False
    same_gpu_count: bool = False
    window: Window | None = None
    timeout_s: int | None = Field(default=None, ge=1)
    fresh: list[FreshFolder] = Field(default_factory=list)
    # how the log is read, declared here (parser: declared; envbuild.recipes.logspec)
    log: LogSpec | None = None

    @field_validator("parser")
    @classmethod
    def _known_parser(cls, v: str, info: ValidationInfo) -> str:
        # checked where a recipe file is read (show, check, lock, plan, render, provision), not
        # in a run record written earlier, whose reader may be gone since
        if isinstance(info.context, dict) and info.context.get("file") and (why := logspec.unknown(v)):
            raise ValueError(why)
        return v

    @model_validator(mode="after")
    def _declared_log(self) -> "Benchmark":
        if self.log is not None and self.parser != logspec.DECLARED:
            raise ValueError(f"log: declares the reader: set parser: {logspec.DECLARED} (not {self.parser!r})")
        if self.parser == logspec.DECLARED and self.log is None:
            raise ValueError(f"parser: {logspec.DECLARED} reads the log by the rules of a log: section; add one")
        if self.log is not None and self.metric not in self.log.metrics:
            raise ValueError(f"metric {self.metric!r} is not one of log.metrics ({', '.join(self.log.metrics)})")
        return self

    @model_validator(mode="after")
    def _threshold_hardware(self) -> "Benchmark":
        if self.threshold is None and (self.threshold_gpu or self.threshold_gpus):
            raise ValueError("threshold_gpu/threshold_gpus name the GPU of a threshold: set threshold too")
        if self.threshold_gpus is not None and not self.threshold_gpu:
            raise ValueError("threshold_gpus needs threshold_gpu (the model the threshold was measured on)")
        return self

    @model_serializer(mode="wrap")
    def _omit_unpublished(self, handler):  # noqa: ANN001, ANN202
        # without a published figure the dump (and so the recipe digest a lock records) is
        # what it was before the field existed: existing locks stay up to date
        data = handler(self)
        if isinstance(data, dict) and data.get("published") is None:
            data.pop("published", None)
        return omit_unset(data, {"source": None, "threshold_gpu": None, "threshold_gpus": None,
                                 "per_gpu": False, "same_gpu_count": False, "window": None,
                                 "timeout_s": None, "fresh": [], "log": None})


class RunOutput(Strict):
    """Where a published script leaves its training output when it is not on its stdout
    (``envbuild.plan.capture`` turns this into the shell around the command).

    * ``file``: it sends the output into this file of its working folder;
    * ``log_index``: it writes the output into a log of its own naming and appends that log's
      path to this index file of its working folder;
    * ``backgrounds``: it starts training with ``&`` as its last command and returns at once.
    """

    file: str | None = None
    log_index: str | None = None
    backgrounds: bool = False
    source: str = Field(min_length=1)  # where the published script does it: owner/repo@sha:path
    why: str = Field(min_length=1)

    @model_validator(mode="after")
    def _something(self) -> "RunOutput":
        if not (self.file or self.log_index or self.backgrounds):
            raise ValueError("say where the output is: file, log_index or backgrounds: true")
        for what in (self.file, self.log_index):
            if what is not None and (what.startswith("/") or ".." in what.split("/") or not what.strip()):
                raise ValueError(f"{what!r} must be a path inside the command's working folder")
        return self


Launcher = Literal["once", "deepspeed", "torchrun", "per-node", "pods"]
DIRECTIVE_RE = re.compile(r"-{1,2}[A-Za-z][A-Za-z0-9-]*(?:[ =][A-Za-z0-9_.:=,@/+-]+)?")


class Run(Strict):
    """How one published command runs on a cluster (``envbuild launch``), with its source.

    * ``once``: the command runs once, on the first node, and starts its own ranks;
    * ``deepspeed``: the DeepSpeed launcher on one node, ``--num_gpus`` = GPUs per node;
    * ``torchrun``: one task per node, each a ``torchrun`` joining a c10d rendezvous on the
      first node;
    * ``per-node``: one task per node running the command with ``multi_node_args`` appended;
    * ``pods``: one pod per node, each running the benchmark variant ``pod_commands`` names
      for its rank, after ``pod_setup``.

    ``argv`` (deepspeed, torchrun: the program and its arguments, argv words quoted when
    rendered) and ``multi_node_args`` may hold ``{cwd}`` and ``{job_dir}``; ``multi_node_args``
    and ``pod_setup`` may use ``$ENVBUILD_NNODES``, ``$ENVBUILD_NODE_RANK``,
    ``$ENVBUILD_MASTER_ADDR``, ``$ENVBUILD_MASTER_PORT``, ``$ENVBUILD_GPUS_PER_NODE`` and
    ``$ENVBUILD_JOB_ID``, set by each scheduler's script. ``files`` are written into the job's
    folder before the start; it is ``$JOB_DIR`` in every task, so a ``once`` or ``per-node``
    command (shell text) runs a program shipped there as ``python "$JOB_DIR"/NAME``
    (``tests/launch/test_launch_user_recipe.py``: a recipe of one's own on Slurm and locally).

    Example::

        run:
          default:
            launcher: once
            gpus_per_node: 1
            total_gpus: [1]
            source: alpa-projects/alpa@e0ae8bf8...:osdi22_artifact/megatron/benchmark_gpt.py
            why: benchmark_gpt.py --nproc_per_node 1 starts torch.distributed.launch itself
    """

    launcher: Launcher
    argv: list[str] = Field(default_factory=list)
    nodes: int = Field(default=1, ge=1)  # default node count
    min_nodes: int = Field(default=1, ge=1)
    max_nodes: int | None = Field(default=1, ge=1)  # null: any
    gpus_per_node: int | None = Field(default=None, ge=0)  # fixed by the published command; 0: none (a CPU program)
    total_gpus: list[int] = Field(default_factory=list)  # the GPU counts it has a configuration for
    gpu_multiple: int = Field(default=1, ge=1)  # total GPUs: a multiple (tensor x pipeline size)
    cpus_per_task: int | None = Field(default=None, ge=1)
    multi_node_args: list[str] = Field(default_factory=list)  # per-node: appended when nodes > 1
    pod_commands: list[str] = Field(default_factory=list)  # pods: the benchmark variant of each rank
    pod_setup: str | None = None  # pods: shell run in each pod's working folder before its command
    files: dict[str, str] = Field(default_factory=dict)  # job-folder files, written before the start
    scheduler_options: dict[Literal["slurm", "pbs", "k8s"], list[str]] = Field(default_factory=dict)
    master_port: int | None = Field(default=None, ge=1, le=65535)  # fixed by the published scripts
    # a variable each node fills at start with every rank's InfiniBand address, across nodes
    # (envbuild/node/ib_addresses.py), for a program that reads its ranks' addresses from it
    address_var: EnvName | None = None
    output: RunOutput | None = None  # where the training output is, when not on stdout
    source: str = Field(min_length=1)
    why: str = Field(min_length=1)

    @field_validator("scheduler_options")
    @classmethod
    def _directive_words(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        # each becomes one "#PBS ..." / "#SBATCH ..." line of the job script: a newline or a
        # shell character would write a line of its own into it
        for scheduler, options in v.items():
            for option in options:
                if not DIRECTIVE_RE.fullmatch(option):
                    raise ValueError(f"{scheduler} option {option!r}: one flag and one value of "
                                     "letters, digits and ._:=,@/+- (e.g. '-l place=scatter')")
        return v

    @field_validator("files")
    @classmethod
    def _plain_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
                raise ValueError(f"file name {name!r}: one plain name in the job's folder")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Run":
        if self.max_nodes is not None and not self.min_nodes <= self.nodes <= self.max_nodes:
            raise ValueError(f"nodes {self.nodes} is outside min_nodes..max_nodes "
                             f"({self.min_nodes}..{self.max_nodes})")
        if self.nodes < self.min_nodes:
            raise ValueError(f"nodes {self.nodes} is below min_nodes {self.min_nodes}")
        if (self.launcher in ("deepspeed", "torchrun")) != bool(self.argv):
            raise ValueError("argv is the program of a deepspeed or torchrun launch, and only of those")
        if (self.launcher == "pods") != bool(self.pod_commands):
            raise ValueError("pod_commands name each pod's command of a pods launch, and only of those")
        if self.multi_node_args and self.launcher != "per-node":
            raise ValueError("multi_node_args are appended by a per-node launch only")
        return self


# Top-level keys that only a target profile has / only a recipe has: a target file passed
# where a recipe is expected gets one clear error instead of a list of unknown fields.
TARGET_ONLY = frozenset({"platform", "gpus", "cuda", "cpu_cores", "memory_gib", "scheduler",
                         "infiniband", "container_runtime", "shm_size", "conda_modules", "files",
                         "cache_dir", "from_facts"})
RECIPE_ONLY = frozenset({"published", "packages", "patches", "deviations", "benchmark",
                         "environment", "import_check"})


class Resources(Strict):
    """Expected use of one kind of experiment, as artifact checklists ask (EuroSys 2027:
    "expected resource use per kind of experiment"): GPUs (per node), GPU memory per GPU, host
    memory, disk, network and wall time. ``basis`` says where the figures come from: ``measured``
    (a run recorded in docs/results, named by ``source``), ``published`` (the authors' page) or
    ``estimate`` (``source`` says how it was made). ``envbuild check`` holds the GPUs, GPU
    memory and host memory against the node; ``show`` and the report's appendix show them all."""

    experiment: Literal["provision", "smoke", "benchmark"]
    gpus: int = Field(ge=0)
    gpu_memory_gib: FiniteFloat | None = Field(default=None, gt=0)  # per GPU; None: not stated
    host_memory_gib: FiniteFloat = Field(gt=0)
    disk_gib: FiniteFloat = Field(ge=0)
    network: str  # what it reaches ("none": offline)
    minutes: FiniteFloat = Field(gt=0)
    basis: Literal["measured", "published", "estimate"]
    source: str


class Undecided(Strict):
    """A field of the recipe its author has still to decide: what ``envbuild draft`` could not
    read from the repository (the Python version, the targets, the benchmark's parser...).
    ``field`` names a recipe field (``python``, ``sources[0].install``), ``why`` says what was
    read and what is missing. ``envbuild check`` (and every preflight: plan, render, provision)
    refuses a recipe while any entry is left (rule ``recipe-undecided``, exit 1): fill the
    field, then delete its entry.

    Example::

        undecided:
          - field: python
            why: "no Python version is stated (setup.py, environment.yml, Dockerfile)"
    """

    field: str = Field(min_length=1)
    why: str = Field(min_length=1)


class Recipe(Strict):
    """One published setup, pinned."""

    schema_: int = Field(alias="schema")
    name: Name  # becomes a path (lockfiles/<name>/): one lower-case component
    title: str
    description: str
    published: Source  # the instructions this recipe reproduces
    default: bool = False
    python: str
    resolve_as_of: str | None = None  # YYYY-MM-DD: unpinned deps resolve as on that day
    targets: list[Name]  # targets this recipe is locked for
    environment: Environment = Environment()
    system_packages: list[str] = Field(default_factory=list)
    packages: list[Package] = Field(default_factory=list)
    sources: list[GitSource] = Field(default_factory=list)
    patches: list[Patch] = Field(default_factory=list)
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    deviations: list[Deviation] = Field(default_factory=list)
    data: list[DataFile] = Field(default_factory=list)  # downloads, fetched and sha256-checked
    benchmark: Benchmark | None = None
    import_check: list[str] = Field(default_factory=list)  # modules that must import after install
    # the Python programs the setup's launch commands run; `envbuild imports` reads their
    # imports at the pinned commits into envbuild/recipes/imports/<name>.yaml
    entry_scripts: list[EntryScript] = Field(default_factory=list)
    launcher: Literal["local", "slurm", "pbs", "kubernetes", "torchrun"] = "local"
    # the shipped recipe this one moves to other hardware or software (alpa-megatron-h100 ->
    # alpa-megatron): `envbuild check` of that recipe names this one where it is refused
    variant_of: Name | None = None
    # the page a user follows to this setup, where it is not ``published`` itself (ALCF's user
    # guide sends users to the repository whose README ``published`` pins)
    guide: Source | None = None
    # steps of the published instructions that fail as written (see Erratum)
    errata: list[Erratum] = Field(default_factory=list)
    # how each published command runs on a cluster: "default" (benchmark.command), a
    # benchmark variant's name, or a layout of its own (pods running variants)
    run: dict[Name, Run] = Field(default_factory=dict)
    # expected use per kind of experiment (one entry per kind)
    resources: list[Resources] = Field(default_factory=list)
    # fields left for the author to decide (a drafted recipe): check refuses while any is left
    undecided: list[Undecided] = Field(default_factory=list)

    # how jobs are started, the resources it expects, on which hardware a benchmark's figures were measured, which of its
    # logged values are timed, the guide that points at the setup and its errata say nothing of
    # what is installed: not part of the digest
    # a lock records (``catalog.digest``), so a recipe's locks stay current when they change.
    # Likewise a deviation's ``test`` and ``handled_by``: they say how envbuild proves its claim
    # (which test, which code), not what is installed, as an erratum's do; its ``instead`` stays
    # in, so a lock goes stale when what envbuild does instead changes, not when a test moves
    DIGEST_EXCLUDE: ClassVar[dict] = {
        "run": True, "guide": True, "errata": True, "resources": True,
        "deviations": {"__all__": {"test": True, "handled_by": True}},
        "benchmark": {"threshold_gpu": True, "threshold_gpus": True, "per_gpu": True, "same_gpu_count": True,
                      "window": True, "timeout_s": True,
                      "published": {"gpu": True, "gpus": True}}}

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _not_a_target(cls, data: object) -> object:
        if isinstance(data, dict) and not RECIPE_ONLY & data.keys():
            found = sorted(TARGET_ONLY & data.keys())
            if found:
                raise ValueError(f"this is a target profile ({', '.join(found)}), not a recipe")
        return data

    def ordered_sources(self) -> list[GitSource]:
        """The sources in the order their steps run: that of ``sources:``, each after the
        sources its ``after:`` names (``envbuild.recipes.order``, docs/recipes.md)."""
        from envbuild.recipes.order import order

        if not any(s.after for s in self.sources):
            return list(self.sources)
        by_name = {s.name: s for s in self.sources}
        if len(by_name) != len(self.sources):
            raise ValueError("sources: each name once (after: names them)")
        return [by_name[n] for n in order(list(by_name), {s.name: list(s.after) for s in self.sources})]

    @field_validator("schema_")
    @classmethod
    def _schema(cls, v: int) -> int:
        if v != 1:
            raise ValueError(f"unsupported recipe schema {v}; this envbuild reads schema 1")
        return v

    @field_validator("python")
    @classmethod
    def _py(cls, v: str) -> str:
        if not re.fullmatch(r"3\.\d+", str(v)):
            raise ValueError(f"python must be 'MAJOR.MINOR' such as '3.9', got {v!r}")
        return str(v)

    @model_validator(mode="after")
    def _refs(self) -> "Recipe":
        names = {s.name for s in self.sources}
        self.ordered_sources()  # every after: names a source, and no circle (ValueError)
        for p in self.patches:
            if p.component not in names:
                raise ValueError(f"patch {p.id!r} names component {p.component!r}, not in sources")
        patch_ids = {p.id for p in self.patches}
        for d in self.deviations:
            for ref in d.handled_by:
                if (m := OWN_PATCH_RE.match(ref)) and m.group(1) not in patch_ids:
                    raise ValueError(f"deviation {d.id!r} is handled_by {ref}, but the recipe has no patch "
                                     f"{m.group(1)!r} (patches: {', '.join(sorted(patch_ids)) or 'none'})")
        for f in self.data:
            if f.component not in names:
                raise ValueError(f"data {f.name!r} names component {f.component!r}, not in sources")
        commands = {"default", *(self.benchmark.variants if self.benchmark else {})}
        for key, run in self.run.items():
            if self.benchmark is None:
                raise ValueError(f"run.{key}: the recipe has no benchmark command to run")
            if run.launcher == "pods":
                unknown = [c for c in run.pod_commands if c not in self.benchmark.variants]
                if unknown:
                    raise ValueError(f"run.{key}.pod_commands names {', '.join(unknown)}, not among benchmark.variants")
            elif key not in commands:
                raise ValueError(f"run.{key}: neither 'default' nor a benchmark variant "
                                 f"({', '.join(sorted(commands))}); only a pods layout has a name of its own")
        fields = {f.alias or n for n, f in type(self).model_fields.items()}
        for u in self.undecided:
            top = re.split(r"[.\[]", u.field, maxsplit=1)[0]
            if top not in fields:
                raise ValueError(f"undecided field {u.field!r}: {top!r} is not a recipe field")
        kinds = [r.experiment for r in self.resources]
        if len(kinds) != len(set(kinds)):
            raise ValueError("resources: one entry per experiment (provision, smoke, benchmark)")
        for s in self.sources:
            if s.build_needs_image and not self.environment.base_image:
                raise ValueError(f"source {s.name!r}: build_needs_image, but the environment has no "
                                 "base_image")
        return self

    @model_serializer(mode="wrap")
    def _omit_new(self, handler):  # noqa: ANN001, ANN202
        return omit_unset(handler(self), {"data": [], "variant_of": None, "run": {}, "guide": None,
                                             "errata": [], "resources": [], "undecided": []})

    def run_of(self, variant: str | None) -> Run | None:
        """How ``variant`` (None: the benchmark's own command) runs on a cluster, if said."""
        return self.run.get(variant or "default")

    def output_of(self, variant: str | None) -> RunOutput | None:
        """Where ``variant``'s training output is when not on its stdout (None: on stdout)."""
        run = self.run_of(variant)
        return run.output if run else None

    def package(self, name: str) -> Package | None:
        return next((p for p in self.packages if p.name.lower() == name.lower()), None)

    def source(self, name: str) -> GitSource | None:
        return next((s for s in self.sources if s.name == name), None)

    @property
    def apex(self) -> GitSource | None:
        return next((s for s in self.sources if s.install == "apex"), None)
