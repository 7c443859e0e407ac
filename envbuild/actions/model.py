"""Primitive actions: what every renderer and executor understands.

A plan step becomes a list of these (``envbuild.actions.steps``); nothing else in envbuild
knows pip, uv, venv, conda or git syntax. Renderers (Ansible variables, Dockerfile,
Apptainer, shell, CI) turn actions into text; executors run them. Values are data: argv
lists (never a command string for a shell), file contents, paths.

    >>> Run(argv=["python3", "-m", "venv", "/opt/env"]).argv[1]
    '-m'
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class _A(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class Run(_A):
    """Run ``argv`` (no shell) with ``env`` added to the environment, in ``cwd``."""

    op: Literal["run"] = "run"
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    path: list[str] = Field(default_factory=list)  # folders put before the node's own $PATH
    stdout: str | None = None  # also write stdout to this file on the node
    changes: bool = True  # False: a check that changes nothing on the node
    # added to argv only when the step runs again because its effect did not hold (decided on
    # the node, see envbuild.actions.effects): e.g. pip's --force-reinstall
    repair_args: list[str] = Field(default_factory=list)
    # the node file the command's output (stdout and stderr) is written to as it runs: the
    # step's build log, tailed live on the controller for the local node (envbuild.execute.livelog)
    log: str | None = None
    # NAME -> [NODE_VAR, ...]: when NAME is not set in the node's environment, it takes the
    # value of the first NODE_VAR that is (uv trusting the CA bundle and the index the node's
    # pip is configured with through PIP_CERT, PIP_INDEX_URL, ...; see envbuild.actions.steps)
    env_from: dict[str, list[str]] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _omit_no_log(self, handler):
        data = handler(self)  # added later: left out when unset, so renders made before stay
        if isinstance(data, dict) and self.log is None:
            data.pop("log", None)
        if isinstance(data, dict) and not self.env_from:
            data.pop("env_from", None)
        return data


class WriteFile(_A):
    """Write ``content`` to ``path`` (parent folders created) with permissions ``perm``."""

    op: Literal["write"] = "write"
    path: str
    content: str
    perm: str = "0644"  # octal permission bits (not "mode": Ansible rewrites that key)


class MakeDir(_A):
    op: Literal["mkdir"] = "mkdir"
    path: str


class CopyAsset(_A):
    """Copy one of envbuild's own files (``asset`` is ``<group>/<file>``, see
    ``envbuild.actions.assets``) to ``dest`` on the node."""

    op: Literal["copy"] = "copy"
    asset: str
    dest: str
    perm: str = "0644"  # octal permission bits (not "mode": Ansible rewrites that key)


class GitCheckout(_A):
    """Clone ``fetch_url`` into ``dest`` (or fetch into an existing clone), check out ``sha``
    detached, verify HEAD; ``url`` is recorded as origin."""

    op: Literal["git"] = "git"
    fetch_url: str
    url: str
    ref: str
    sha: str | None
    dest: str
    # after the checkout: `git submodule update --init <path>` for each, at the commit the tree
    # records; submodule_mirrors: URL in .gitmodules -> mirror copy (git's url.<m>.insteadOf)
    submodules: list[str] = Field(default_factory=list)
    submodule_mirrors: dict[str, str] = Field(default_factory=dict)
    # documents the source's copy lacks (GitSource.without): a sparse checkout leaves them out
    without: list[str] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_nothing_left_out(self, handler):  # noqa: ANN001, ANN202
        # added later: left out when empty, so the actions of every other source stay as they were
        data = handler(self)
        if isinstance(data, dict) and not data.get("without"):
            data.pop("without", None)
        return data


class ApplyPatch(_A):
    """Apply one declarative patch (envbuild.node.textpatch) to the tree at ``dest``."""

    op: Literal["patch"] = "patch"
    spec: dict  # textpatch's patch spec: id, kind, file, old, new, count, decision, nvcc, torch_cuda
    dest: str
    diff_dir: str


class BuildWheel(_A):
    """Build a wheel with ``argv`` in ``cwd`` into ``outdir``, once per ``cache_key``:
    an executor with a wheel cache reuses a wheel built on another node."""

    op: Literal["wheel"] = "wheel"
    argv: list[str]
    cwd: str
    env: dict[str, str] = Field(default_factory=dict)
    path: list[str] = Field(default_factory=list)
    outdir: str
    cache_key: str


class Capture(_A):
    """Run ``argv`` after sourcing ``env_file`` (when present), its stdout, stderr and exit
    status kept in ``<dir>/<name>.out|.err|.rc``; a failure is reported after every capture
    of the step ran (the smoke runs)."""

    op: Literal["capture"] = "capture"
    name: str
    argv: list[str]
    cwd: str
    dir: str
    env_file: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout: int = 1800


class StageDir(_A):
    """Copy the controller folder ``src`` (an unpacked bundle's ``node/``) to ``dest`` on the
    node, file by file; ``files`` maps each relative path to its sha256 (checked by the
    step's effect on the node, not trusted from the copy)."""

    op: Literal["stage"] = "stage"
    src: str
    dest: str
    files: dict[str, str] = Field(default_factory=dict)


Action = Annotated[Union[Run, WriteFile, MakeDir, CopyAsset, GitCheckout, ApplyPatch,
                         BuildWheel, Capture, StageDir], Field(discriminator="op")]
