"""The plan of an image: what the Dockerfile, Apptainer and CI renderers share. Pure.

An image is planned like a node whose facts are the image's: ``$HOME`` is /root, the OS,
nvcc and Python are the base image's (``envbuild.render.bases``), the GPUs are the target's
(``TORCH_CUDA_ARCH_LIST`` for extension builds comes from them; nothing needs a visible GPU
at build time), and the prefix is fixed: ``/opt/envbuild/<recipe>``.

The environment inside an image is always a venv over the image's Python: a conda prefix only
brought Python (the image has it), an environment module does not exist in an image, and for
the container recipes the venv sees the base image's packages (torch, Apex in NGC images)
through ``--system-site-packages``, so every step's ``<prefix>/bin/python`` exists.

The plan's steps then split in two: install steps run at build time; the import check and the
smoke run inside the built image (``verify.sh``), where a GPU recipe has its GPUs.

A Dockerfile bakes a data file only when the recipe records its sha256: a layer would otherwise
keep whatever the build machine downloaded, unchecked and for good. The files without one, and
the build steps of their tree that follow them (they read the files: Megatron-DeepSpeed's
preprocessing), run when a container starts instead, from ``prepare.sh`` in the image
(``run_time_steps``; ``envbuild launch`` runs it before the training command).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from envbuild import __version__
from envbuild.actions.model import BuildWheel
from envbuild.errors import InputError
from envbuild.actions.steps import actions as step_actions, python_of
from envbuild.facts.model import Interpreter, NodeFacts
from envbuild.facts.profile import from_target
from envbuild.fsio import sha256_text
from envbuild.plan import params as P
from envbuild.plan.build import SEARCH_PATH, PlanOptions
from envbuild.plan.model import Plan, Step
from envbuild.plan.node_plan import resolve_environment
from envbuild.render.bases import BaseImage, choose
from envbuild.render.shell import Where, commands, capture_failures, q, shipped
from envbuild.shipped import NODE

IMAGE_ROOT = "/opt/envbuild"
WHEELHOUSE = "/opt/envbuild/wheelhouse"  # where a context's wheelhouse/ is mounted at build time
VERIFY_STEPS = ("import_check", "smoke")  # run inside the built image, not at build time
PREPARE = "prepare.sh"  # in the files folder: the run-time steps (data without a recorded sha256)
GLIBC = {("ubuntu", "18.04"): "2.27", ("ubuntu", "20.04"): "2.31", ("ubuntu", "22.04"): "2.35",
         ("ubuntu", "24.04"): "2.39", ("debian", "12"): "2.36"}
VERIFY_TOOL = NODE / "verify_image.py"


@dataclass(frozen=True)
class ImagePlan:
    recipe: object  # the recipe as given (envbuild.recipes.schema.Recipe)
    target: object
    base: BaseImage
    plan: Plan  # planned for the image (venv at /opt/envbuild/<recipe>)
    lock_text: str | None
    wheelhouse: list[str] = field(default_factory=list)  # wheel file names the build needs
    notes: list[str] = field(default_factory=list)  # what the image changes from the recipe

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
    def where(self) -> Where:
        return Where(files=self.files_dir, python=python_of(self.prefix))

    @property
    def feasible(self) -> bool:
        return bool(self.plan.steps[0].params.feasible)

    def tooling(self) -> Step | None:
        """apt packages the base image lacks for the plan (the CUDA devel images: Python)."""
        pkgs = []
        py = self.recipe.python
        if self.base.apt_python:
            pkgs += [f"python{py}", f"python{py}-venv", f"python{py}-dev"]
        elif self.base.provides:  # NGC: Python is there; its venv module may not be
            pkgs += [f"python{py}-venv"]
        if self.recipe.sources and self.base.apt_python:
            pkgs += ["git", "ca-certificates"]
        if not pkgs:
            return None
        return Step(id="image-tooling", title="Python and git for the base image",
                    params=P.SystemPackagesParams(packages=pkgs),
                    reason=f"{self.base.image} has no Python {py} venv (or git) of its own")

    def build_steps(self, run_time_data: bool = False) -> list[tuple[Step, list]]:
        """The steps the image build runs; ``run_time_data``: without those of
        ``run_time_steps`` (a data file without a recorded sha256 is not baked)."""
        out = []
        steps = self.plan.steps
        if not self.feasible:  # an infeasible verdict stops the build at its first RUN
            out.append((steps[0], step_actions(steps[0], self.prefix)))
        tool = self.tooling()
        if tool is not None:
            out.append((tool, step_actions(tool, self.prefix)))
        built = [s for s in steps[1:] if s.kind not in VERIFY_STEPS]
        if run_time_data:
            built = split_data(built)[0]
        out += [(s, step_actions(s, self.prefix)) for s in built]
        return out

    def run_time_steps(self) -> list[tuple[Step, list]]:
        """What ``prepare.sh`` runs when a container starts: the data files without a recorded
        sha256 and the build steps of their tree after them (``split_data``)."""
        return [(s, step_actions(s, self.prefix)) for s in run_time_steps(self.plan)]

    def run_time_note(self) -> str | None:
        """The note an image with run-time steps carries (Dockerfile, container plan, launch)."""
        steps = run_time_steps(self.plan)
        if not steps:
            return None
        files = [f.name for s in steps if s.kind == "data" for f in s.params.files]
        after = [s.id for s in steps if s.kind != "data"]
        return (f"data without a sha256 in the recipe ({', '.join(files)}) is not baked into a layer: "
                f"{self.files_dir}/{PREPARE} fetches it when a container starts (network needed there; "
                f"the first fetch's sha256 is recorded in the container and printed, later fetches must "
                f"match it)" + (f" and runs {', '.join(after)}, which reads it" if after else "")
                + "; envbuild launch runs it before the training command. Record the sha256 in the "
                "recipe's data section to bake the file")

    def verify_steps(self) -> list[tuple[Step, list]]:
        return [(s, step_actions(s, self.prefix)) for s in self.plan.steps if s.kind in VERIFY_STEPS]

    def env_file(self) -> P.EnvFileParams | None:
        return next((s.params for s in self.plan.steps if s.kind == "env_file"), None)

    def host_env(self) -> dict[str, str]:
        """The env file's variables that are the target node's, not the environment's: the
        target's ``env`` (NCCL/UCX settings, a topology file on the host) and the cache folders
        from its ``cache_dir``, unless the recipe sets them itself. An image carries them as a
        file to pass at run time on such a node, never in its ``ENV``."""
        ef = self.env_file()
        if ef is None:
            return {}
        host = set(self.target.env) | ({"PIP_CACHE_DIR", "TMPDIR"} if self.target.cache_dir else set())
        out = {k: v for k, v in ef.vars.items() if k in host and k not in self.recipe.env}
        for k, v in out.items():  # docker --env-file takes a line per variable, values verbatim
            if "\n" in v or "\r" in v:
                raise InputError(f"target {self.target.name}: env {k} holds a line break",
                                 hint="an environment value is one line")
        return out

    def sources(self) -> dict[str, str]:
        """``{name: sha}`` of the git sources (labels, verify)."""
        return {s.params.name: s.params.sha or s.params.ref for s in self.plan.steps
                if s.kind == "git_source"}

    def labels(self) -> dict[str, str]:
        rec = self.recipe
        out = {
            "org.opencontainers.image.title": f"envbuild {rec.name} ({self.target.name})",
            "org.opencontainers.image.description": " ".join(rec.title.split()),
            "org.opencontainers.image.base.name": self.base.image,
            **({"org.opencontainers.image.base.digest": self.base.digest} if self.base.digest else
               {"io.envbuild.base.pinned": "no: a tag, which its registry may move or delete; "
                                           "render with --base NAME@sha256:HEX to pin it"}),
            "org.opencontainers.image.version": __version__,
            "io.envbuild.recipe": rec.name,
            "io.envbuild.target": self.target.name,
            "io.envbuild.lock.sha256": self.plan.lock_digest or "none",
            "io.envbuild.plan.sha256": plan_digest(self.plan),
            "io.envbuild.version": __version__,
        }
        url = rec.published.url
        # the OCI spec's source is a URL; envbuild's own reference is "envbuild:README.md#..."
        out["org.opencontainers.image.source" if url.startswith(("https://", "http://")) else "io.envbuild.published"] = url
        for name, sha in self.sources().items():
            out[f"io.envbuild.source.{name}"] = sha
        return out

    def verify_spec(self) -> dict:
        """What ``verify_image.py`` checks inside the image."""
        packages: dict[str, str] = {}
        for s in self.plan.steps:
            if s.kind in ("pip_tooling", "pip_install"):
                for r in s.params.requirements:
                    packages[r.name] = r.requirement[len(r.name):]
        modules = next((list(s.params.modules) for s in self.plan.steps if s.kind == "import_check"), [])
        trees = {s.params.dest: s.params.sha for s in self.plan.steps
                 if s.kind == "git_source" and s.params.sha and s.params.dest not in self.devel_dests()}
        return {"schema": "envbuild.verify/1", "recipe": self.recipe.name, "prefix": self.prefix,
                "lock_sha256": self.plan.lock_digest, "modules": modules, "packages": packages,
                "sources": trees}

    def devel_dests(self) -> set[str]:
        """Trees only needed to build a wheel (they stay in the devel stage)."""
        return {a.cwd for _, acts in self.build_steps() for a in acts if isinstance(a, BuildWheel)}


def split_data(steps: list[Step]) -> tuple[list[Step], list[Step]]:
    """``steps`` as (baked, run time): a data step's files without a sha256 go to run time (a
    data step with some of each is split in two), and so does every later build step of their
    tree, which reads them (the planner puts a tree's build commands after its data for that
    reason: ``envbuild.plan.data``). Any other later step of that tree (an install) cannot wait
    for run time: InputError."""
    trees = {s.params.name: s.params.dest for s in steps if s.kind == "git_source"}
    baked: list[Step] = []
    later: list[Step] = []
    waiting: dict[str, str] = {}  # tree -> the data step whose files it waits for
    for s in steps:
        if s.kind == "data":
            files = list(s.params.files)
            unchecked = [f for f in files if not f.sha256]
            checked = [f for f in files if f.sha256]
            if checked:
                baked.append(_data_part(s, checked) if unchecked else s)
            if unchecked:
                later.append(_data_part(s, unchecked) if checked else s)
                waiting[trees.get(s.params.component, "")] = s.id
        elif getattr(s.params, "dest", None) in waiting:
            if s.kind != "build":
                raise InputError(f"step {s.id} needs the tree {s.params.dest} built, after "
                                 f"{waiting[s.params.dest]}, whose data files have no sha256 in the recipe "
                                 "and are fetched when a container starts, not baked into the image",
                                 hint="record each file's sha256 in the recipe's data section "
                                      "(sha256: HEX), so the image bakes it")
            later.append(s)
        else:
            baked.append(s)
    return baked, later


def _data_part(step: Step, files: list) -> Step:
    params = step.params.model_copy(update={"files": files})
    return step.model_copy(update={"params": params,
                                   "title": f"{len(files)} data file(s) for {params.component}"})


def run_time_steps(plan: Plan) -> list[Step]:
    """The steps of an image's ``plan`` that its ``prepare.sh`` runs (``split_data``)."""
    return split_data([s for s in plan.steps if s.kind not in VERIFY_STEPS])[1]


def prepare_script(plan: Plan) -> str | None:
    """Where the image of ``plan`` has its ``prepare.sh`` (None: it has none): ``plan`` is an
    image's (``image_plan(...).plan``) or a container node's (its ``image`` step's context)."""
    image = next((s.params for s in plan.steps if s.kind == "image"), None)
    if image is not None:
        return f"{image.prefix}/.envbuild/files/{PREPARE}" if f"envbuild/{PREPARE}" in image.files else None
    return f"{plan.prefix}/.envbuild/files/{PREPARE}" if run_time_steps(plan) else None


def plan_digest(plan: Plan) -> str:
    return sha256_text(plan.to_json())


def image_recipe(recipe):
    """The recipe as an image environment: a venv over the image's Python (see the module
    docstring), seeing the base image's packages when the recipe's environment is the
    image or an environment module."""
    env = recipe.environment
    if env.kind == "venv":
        return recipe
    system = env.system_site_packages or env.kind in ("container", "module-venv")
    new_env = env.model_copy(update={"kind": "venv", "conda_module": None, "system_site_packages": system})
    return recipe.model_copy(update={"environment": new_env})


def image_facts(target, base: BaseImage, python: str) -> NodeFacts:
    """A node inside ``base`` running on ``target``'s hardware."""
    facts = from_target(target)
    return facts.model_copy(update={
        "host": "image", "origin": f"image:{base.image}+profile:{target.name}",
        "home": "/root", "path": SEARCH_PATH, "user": "root",
        "os_id": base.os_id or facts.os_id, "os_version": base.os_version or facts.os_version,
        "glibc": GLIBC.get((base.os_id, base.os_version), facts.glibc),
        "nvcc": base.nvcc, "nvcc_path": "/usr/local/cuda/bin/nvcc" if base.nvcc else None,
        "cuda_home": "/usr/local/cuda" if base.nvcc else None,
        "pythons": [Interpreter(path=base.python_path.format(v=python), version=python)],
        "conda": [], "modules": [], "missing": {}, "container_engines": {},
    })


def torch_variant(recipe, plan: Plan) -> str | None:
    """``cu113``/``cpu`` from the planned torch requirement, else the recipe's pin."""
    for s in plan.steps:
        if s.kind == "pip_install":
            for r in s.params.requirements:
                if r.name.lower() == "torch" and "+" in r.version:
                    return r.version.split("+", 1)[1]
    pkg = recipe.package("torch")
    return pkg.cuda if pkg is not None and pkg.cuda not in (None, "auto") else None


def image_plan(recipe, target, lock, *, lock_text: str | None = None, base: str | None = None,
               wheelhouse: bool = False, smoke_preset: str = "tiny", inventory=None) -> ImagePlan:
    """Plan ``recipe`` for an image on ``target``'s hardware. ``wheelhouse``: locked wheels
    from a wheelhouse come from the context's ``wheelhouse/`` folder (mounted at build)."""
    rec = image_recipe(recipe)
    # the node's scratch disk (cache_dir: PIP_CACHE_DIR, TMPDIR under /mnt) is not in the image
    target = target.model_copy(update={"cache_dir": None}) if target.cache_dir else target
    opts = PlanOptions(prefix=f"{IMAGE_ROOT}/{recipe.name}", host="image", smoke=True,
                       smoke_preset=smoke_preset, wheelhouse=WHEELHOUSE if wheelhouse else None,
                       inventory=inventory)  # {inventory.*} of the nodes the image is for (patches)
    # first pass on the target's facts: the torch variant decides the base image
    first = resolve_environment(rec, target, image_facts(target, choose(recipe, None, base), recipe.python),
                                lock, opts).plan
    chosen = choose(recipe, torch_variant(recipe, first), base)
    plan = resolve_environment(rec, target, image_facts(target, chosen, recipe.python), lock, opts).plan
    notes = []
    if recipe.environment.kind != "venv":
        notes.append(f"the recipe's {recipe.environment.kind} environment becomes a venv over "
                     f"the image's Python {recipe.python}"
                     + (" with --system-site-packages" if rec.environment.system_site_packages else ""))
    for pkg in recipe.packages:  # the recipe's own image provides its preinstalled packages
        if pkg.preinstalled and not recipe.environment.base_image and pkg.name not in chosen.provides:
            notes.append(f"{pkg.name} {pkg.version} is preinstalled on {target.name} (not by pip) "
                         f"and {chosen.image} does not provide it: give --base an image that does, "
                         f"or verify.sh fails on it")
    wheels = []
    if wheelhouse and lock is not None:
        wheels = sorted(p.dist.filename for p in getattr(lock, "packages", [])
                        if getattr(p, "from_wheelhouse", False) and p.dist is not None)
    return ImagePlan(recipe=recipe, target=target, base=chosen, plan=plan, lock_text=lock_text,
                     wheelhouse=wheels, notes=notes)


def verify_sh(ip: ImagePlan, files: str) -> str:
    """``verify.sh [--smoke]``: the import check and the lock check inside the image, then the
    smoke runs when asked (their outputs in the plan's smoke folder)."""
    where = Where(files=files, python=python_of(ip.prefix))
    lines = ["#!/bin/sh",
             f"# envbuild {__version__}: checks the image of {ip.recipe.name} ({ip.target.name}) "
             "against its lock.",
             "# usage: verify.sh [--smoke]   (run inside the image)",
             "set -eu",
             f"{q(python_of(ip.prefix))} {where.file('verify_image.py')} {where.file('verify.json')}"]
    smoke = [(s, a) for s, a in ip.verify_steps() if s.kind == "smoke"]
    if smoke:
        lines += ['if [ "${1:-}" = --smoke ]; then', "  failed=''"]
        for _, acts in smoke:
            for cmd in commands(acts, where):
                lines.append("  " + cmd)
        lines += ["  " + capture_failures(), "  echo 'smoke passed'", "fi"]
    return "\n".join(lines) + "\n"


def prepare_sh(ip: ImagePlan, files: str) -> str:
    """``prepare.sh``: the run-time steps (``ImagePlan.run_time_steps``), run inside the image
    before the training command."""
    where = Where(files=files, python=python_of(ip.prefix))
    lines = ["#!/bin/sh",
             f"# envbuild {__version__}: prepares a container of the image of {ip.recipe.name} "
             f"({ip.target.name}) before its run.",
             "# usage: prepare.sh   (inside the container, before the training command; envbuild launch runs it)",
             *("# " + line for line in textwrap.wrap(ip.run_time_note() or "", 96)),
             "set -eu"]
    for step, acts in ip.run_time_steps():
        lines += [f"# step {step.id}: {step.title}", *commands(acts, where)]
    return "\n".join(lines) + "\n"


def verify_files(ip: ImagePlan) -> dict[str, str | Path]:
    """Files of the verify step under the files folder: ``{relative: text or Path}``."""
    out: dict[str, str | Path] = {"verify_image.py": VERIFY_TOOL,
                                  "verify.json": json.dumps(ip.verify_spec(), indent=2, sort_keys=True) + "\n"}
    for _, acts in ip.verify_steps():
        out.update(shipped(acts))
    return out
