"""What each plan step leaves on the node, as data: the evidence a step is really done.

A step is skipped only when its marker (``<prefix>/.envbuild/state/<id>.done``, the step's
digest) matches **and** its effect holds on the node now. ``effects(plan)`` is pure: every
effect is derived from the plan alone, and the node-side checker
(``envbuild.node.effects.check_effect``, standard library only) interprets it.

    >>> from envbuild.plan.model import Plan, Step
    >>> from envbuild.plan.params import EnvFileParams
    >>> step = Step(id="env-file", title="env", params=EnvFileParams(path="/e/.envbuild/env.sh", vars={}))
    >>> plan = Plan(recipe="r", target="t", host="h", prefix="/e", backend="venv", steps=[step])
    >>> effects(plan)["env-file"].check
    'file'

Effects by step kind:

- ``environment``: the interpreter ``<prefix>/bin/python`` exists, runs and is the prefix's own
  (``sys.prefix``); a venv's ``pyvenv.cfg`` has the planned system-site setting and no ``.pth``
  file in it is foreign (``interpreter``);
- ``uv_tool``: the pushed uv binary has the planned sha256 and mode 0755 (``file``);
- ``pip_tooling`` / ``pip_install``: every named distribution (and pip and setuptools, at any
  version, where pip-tooling puts in ensurepip's wheels of them) is installed at its locked version, and
  every file of its RECORD is present with the recorded size and hash (``dists``), whichever
  installer wrote it (pip, or uv: it writes RECORD with the wheel's hashes and ``INSTALLER`` =
  ``uv``); ``apex_build``: the ``apex`` distribution likewise, at any version. A RECORD file
  that is a top-level extension module (``<module>.so``, ``<module>.<tag>.so``) which a later
  build step installs into the environment over it (``later_writes``: its source's
  ``build_provides``; GPT-NeoX's fused kernels over Apex's) must exist, its size and hash are
  not compared;
- ``git_source``: HEAD is the pinned SHA and no tracked file differs from that commit, except
  the files the plan's patches change, which must equal the commit's text with those patches
  applied in plan order (``git``);
- ``patch``: the patch reports ``already-applied`` on the tree (``patch``);
- ``env_file``: the file's sha256 equals the text the plan writes (``file``);
- ``install_source``: ``pth``: the .pth file in the environment's purelib holds the tree;
  ``editable``/``wheel``: a distribution whose ``direct_url.json`` names the tree is
  installed, its RECORD intact (``source``);
- ``image`` (container backend): the node's engine has the image with the planned labels,
  the build context's digest among them (``image``); ``image_import``: the squashfs is there
  (``exists``);
- ``bundle`` (offline): every file of the bundle's ``node/`` folder is in ``<prefix>/.envbuild/
  bundle`` with its size, and its sha256 when the check is deep (``files``);
- ``preflight``, ``system_packages``, ``build``, ``import_check``, ``smoke``, ``image_check``,
  ``image_smoke``: no observable
  effect of their own (their results are what later steps and the smoke check): the marker
  alone decides (``None``).

Speed: RECORD hashes are checked in full when a step records its marker (after it ran) and
by ``envbuild verify --deep``; a no-op provision and a plain ``verify`` compare each file's
size, mtime and ctime with the manifest recorded then
(``<prefix>/.envbuild/state/<id>.manifest.json``) and hash only the files whose stat differs
(see ``envbuild.node.effects``).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from envbuild.actions.steps import env_file_text, patch_spec, python_of
from envbuild.compat.wheel_records import record_defects
from envbuild.fsio import sha256_text
from envbuild.names import project_name
from envbuild.plan import params as P

_EXACT = re.compile(r"^[0-9][0-9A-Za-z.+!_-]*$")


class _E(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class InterpreterEffect(_E):
    """``python`` exists, runs and is the environment's own: its ``sys.prefix`` is ``prefix``.
    For a venv (``venv``) also: ``pyvenv.cfg`` says ``include-system-site-packages`` as planned,
    and every ``.pth`` file in its purelib is owned by an installed distribution's RECORD or is
    envbuild's own (``envbuild-*.pth``, ``_envbuild_*.pth``): a .pth line that starts with
    ``import`` runs at every start of the interpreter."""

    check: Literal["interpreter"] = "interpreter"
    python: str
    prefix: Optional[str] = None
    venv: bool = False
    system_site_packages: bool = False


class DistsEffect(_E):
    """Each distribution installed in the environment of ``python`` at its version (None: any
    version), every RECORD file present with its size and hash."""

    check: Literal["dists"] = "dists"
    python: str
    dists: dict[str, Optional[str]]  # canonical name -> exact version or None
    # canonical name -> RECORD paths wrong in the published wheel itself (envbuild.compat.wheel_records)
    record_defects: dict[str, list[str]] = Field(default_factory=dict)
    # top-level module -> id of a later build step that installs it into the environment over
    # this step's copy (its source's build_provides): those RECORD files must exist, their
    # size and hash are not compared
    later_writes: dict[str, str] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _no_empty_defects(self, handler):  # the usual effect stays as it was: no empty key
        data = handler(self)
        for key in ("record_defects", "later_writes"):
            if not data.get(key):
                data.pop(key, None)
        return data


class GitEffect(_E):
    """``dest`` is a git tree at ``sha``; tracked files equal the commit, the files in
    ``patches`` equal the commit's text with those patches applied in order."""

    check: Literal["git"] = "git"
    dest: str
    sha: Optional[str]  # None: an unpinned ref (only a clean tree is checked)
    patches: list[dict] = Field(default_factory=list)  # textpatch specs on this tree, plan order


class PatchEffect(_E):
    """The declarative patch ``spec`` says ``already-applied`` on the tree at ``dest``."""

    check: Literal["patch"] = "patch"
    dest: str
    spec: dict


class FileEffect(_E):
    """The file ``path`` has the sha256 ``sha256`` and the permission bits ``perm``."""

    check: Literal["file"] = "file"
    path: str
    sha256: str
    perm: str = "0644"


class PthEffect(_E):
    """``envbuild-<name>.pth`` in the purelib of ``python`` holds ``content``."""

    check: Literal["pth"] = "pth"
    python: str
    name: str
    content: str


class SourceEffect(_E):
    """A distribution installed from the tree ``dest`` (its direct_url.json names it;
    ``editable`` as planned), RECORD intact."""

    check: Literal["source"] = "source"
    python: str
    dest: str
    editable: bool


class ImageEffect(_E):
    """The engine ``engine`` (run with ``env``) has the image ``tag`` and it carries every
    label of ``labels`` with its value (the build context's and the image plan's digests)."""

    check: Literal["image"] = "image"
    engine: str
    env: dict[str, str] = Field(default_factory=dict)
    tag: str
    labels: dict[str, str]


class ExistsEffect(_E):
    """``path`` is a non-empty file (an enroot squashfs: too large to hash on every check;
    the step's digest names the image it was imported from)."""

    check: Literal["exists"] = "exists"
    path: str


class FilesEffect(_E):
    """Every file of ``files`` (path relative to ``dir`` -> [size, sha256]) is under ``dir``
    with that size; its sha256 too when the check is deep (when the step records its marker,
    and ``verify --deep``): the offline bundle's copy on the node."""

    check: Literal["files"] = "files"
    dir: str
    files: dict[str, list]


Effect = Annotated[Union[InterpreterEffect, DistsEffect, GitEffect, PatchEffect, FileEffect,
                         PthEffect, SourceEffect, ImageEffect, ExistsEffect, FilesEffect],
                   Field(discriminator="check")]



def _requirements_effect(python: str, reqs: list[P.Requirement], later: dict[str, str],
                         any_version: list[str] | None = None) -> DistsEffect:
    dists: dict[str, Optional[str]] = dict.fromkeys(any_version or [])
    defects: dict[str, list[str]] = {}
    for r in reqs:
        exact = r.requirement.replace(" ", "").endswith("==" + r.version)
        dists[project_name(r.name)] = r.version if exact and _EXACT.match(r.version) else None
        if paths := record_defects(project_name(r.name), r.hashes):
            defects[project_name(r.name)] = paths
    return DistsEffect(python=python, dists=dists, record_defects=defects, later_writes=later)


def later_writes(plan) -> list[dict[str, str]]:
    """For each step of ``plan``, in order: ``{module: step id}`` of the build steps after it that
    install into the environment (``BuildParams.env_writer()``) the modules their source provides;
    the last such build names a module.

    >>> from envbuild.plan.model import Plan, Step
    >>> build = P.BuildParams(name="k", dest="/t", commands=["python setup.py install"], provides=["m_cuda"])
    >>> plan = Plan(recipe="r", target="t", host="h", prefix="/e", backend="venv", steps=[
    ...     Step(id="env-file", title="", params=P.EnvFileParams(path="/e/env.sh", vars={})),
    ...     Step(id="build:k", title="", params=build)])
    >>> later_writes(plan)
    [{'m_cuda': 'build:k'}, {}]
    """
    out: list[dict[str, str]] = []
    after: dict[str, str] = {}
    for step in reversed(plan.steps):
        out.append(dict(after))
        p = step.params
        if isinstance(p, P.BuildParams) and p.env_writer() is not None:
            for module in p.provides:
                after.setdefault(module, step.id)  # seen backwards: the last writer stays
    return list(reversed(out))


def effects(plan) -> dict[str, Optional[Effect]]:
    """``{step id: effect or None}`` for every step of ``plan`` (``envbuild.plan.model.Plan``)."""
    python = python_of(plan.prefix)
    out: dict[str, Optional[Effect]] = {}
    for step, over in zip(plan.steps, later_writes(plan)):
        p = step.params
        eff: Optional[Effect] = None
        if p.kind == "environment" and p.backend != "container":
            eff = InterpreterEffect(python=python, prefix=plan.prefix, venv=p.backend in ("venv", "module-venv"),
                                    system_site_packages=p.system_site_packages)
        elif p.kind in ("pip_tooling", "pip_install"):  # pip or uv: both write RECORD (uv: INSTALLER=uv)
            seeded = ((["setuptools"] if p.seed_setuptools else []) + list(p.seed_ensurepip)
                      if p.kind == "pip_tooling" else [])  # ensurepip's wheels, any version
            eff = _requirements_effect(python, p.requirements, over, any_version=seeded)
        elif p.kind == "uv_tool":
            eff = FileEffect(path=p.dest, sha256=p.sha256, perm="0755")
        elif p.kind == "apex_build":
            eff = DistsEffect(python=python, dists={project_name(p.dist_name): None}, later_writes=over)
        elif p.kind == "git_source":
            later = [s.params for s in plan.steps
                     if s.kind == "patch" and s.params.component == p.name and s.params.dest == p.dest]
            eff = GitEffect(dest=p.dest, sha=p.sha, patches=[patch_spec(q) for q in later])
        elif p.kind == "patch":
            eff = PatchEffect(dest=p.dest, spec=patch_spec(p))
        elif p.kind == "env_file":
            text = env_file_text(plan.prefix, p.vars)
            eff = FileEffect(path=p.path, sha256=sha256_text(text))
        elif p.kind == "install_source":
            if p.mode == "pth":
                eff = PthEffect(python=python, name=p.name, content=p.dest + "\n")
            else:
                eff = SourceEffect(python=python, dest=p.dest, editable=p.mode == "editable")
        elif p.kind == "image":
            from envbuild.actions.steps import engine_env

            eff = ImageEffect(engine=p.engine.name, env=engine_env(p.engine), tag=p.tag, labels=dict(p.labels))
        elif p.kind == "image_import":
            eff = ExistsEffect(path=p.path)
        elif p.kind == "bundle":
            eff = FilesEffect(dir=p.dir, files={f.name: [f.size, f.sha256] for f in p.files})
        out[step.id] = eff
    return out


def effect_data(plan) -> dict[str, Optional[dict]]:
    """``effects(plan)`` as JSON data, what the node-side checker reads."""
    return {sid: (e.model_dump(mode="json") if e is not None else None) for sid, e in effects(plan).items()}
