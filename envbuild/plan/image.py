"""The plan of an image: what the Dockerfile, Apptainer and CI renderers render, and what a
container node's image step carries. Pure.

An image is planned like a node whose facts are the image's: ``$HOME`` is /root, the OS,
nvcc and Python are the base image's (``envbuild.compat.base_images``), the GPUs are the target's
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

The result is ``envbuild.plan.params.ImagePlan``: typed data, the nested node plan included.
Rendering it (``envbuild.render.image``, ``render.dockerfile``...) is the renderers' work.
"""

from __future__ import annotations

from functools import lru_cache

from envbuild import __version__
from envbuild.compat.base_images import BaseImage, choose
from envbuild.errors import InputError
from envbuild.facts.model import Interpreter, NodeFacts
from envbuild.facts.profile import from_target
from envbuild.fsio import canonical_json, sha256_file, sha256_text
from envbuild.plan import params as P
from envbuild.plan.build import SEARCH_PATH, PlanOptions
from envbuild.plan.model import Plan, Step
from envbuild.plan.node_plan import resolve_environment
from envbuild.shipped import IMAGE_CODE, PACKAGE

IMAGE_ROOT = "/opt/envbuild"
WHEELHOUSE = "/opt/envbuild/wheelhouse"  # where a context's wheelhouse/ is mounted at build time
VERIFY_STEPS = ("import_check", "smoke")  # run inside the built image, not at build time
PREPARE = "prepare.sh"  # in the files folder: the run-time steps (data without a recorded sha256)
GLIBC = {("ubuntu", "18.04"): "2.27", ("ubuntu", "20.04"): "2.31", ("ubuntu", "22.04"): "2.35",
         ("ubuntu", "24.04"): "2.39", ("debian", "12"): "2.36"}


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
            if (writer := s.params.env_writer()) is not None:  # the environment is written at build time only
                raise InputError(f"step {s.id} writes the environment ({writer!r}) and comes after "
                                 f"{waiting[s.params.dest]}, whose data files have no sha256 in the recipe "
                                 "and are fetched when a container starts: an image's environment is "
                                 "written when it is built, never at a container's start (its user may not "
                                 "write it, and every container would install again)",
                                 hint="record each file's sha256 in the recipe's data section (sha256: HEX), "
                                      "so the image bakes the data and the build; or move the install out of "
                                      f"{s.params.name}'s build into a source of its own (install: ..., "
                                      "ordered with after:)")
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


def build_steps(ip: P.ImagePlan, run_time_data: bool = False) -> list[Step]:
    """The steps the image build runs, in order; ``run_time_data``: without those of
    ``run_time_steps`` (a data file without a recorded sha256 is not baked)."""
    steps = ip.plan.steps
    out = [] if ip.feasible else [steps[0]]  # an infeasible verdict stops the build at its first RUN
    if ip.tooling is not None:
        out.append(ip.tooling)
    built = [s for s in steps[1:] if s.kind not in VERIFY_STEPS]
    return out + (split_data(built)[0] if run_time_data else built)


def verify_steps(ip: P.ImagePlan) -> list[Step]:
    """The steps run inside the built image (``verify.sh``): the import check and the smoke."""
    return [s for s in ip.plan.steps if s.kind in VERIFY_STEPS]


def run_time_note(ip: P.ImagePlan) -> str | None:
    """The note an image with run-time steps carries (Dockerfile, container plan, launch)."""
    steps = run_time_steps(ip.plan)
    if not steps:
        return None
    files = [f.name for s in steps if s.kind == "data" for f in s.params.files]
    after = [s.id for s in steps if s.kind != "data"]
    return (f"data without a sha256 in the recipe ({', '.join(files)}) is not baked into a layer: "
            f"{ip.files_dir}/{PREPARE} fetches it when a container starts (network needed there; "
            f"the first fetch's sha256 is recorded in the container and printed, later fetches must "
            f"match it)" + (f" and runs {', '.join(after)}, which reads it" if after else "")
            + "; envbuild launch runs it before the training command. Record the sha256 in the "
            "recipe's data section to bake the file")


def prepare_script(plan: Plan) -> str | None:
    """Where the image of ``plan`` has its ``prepare.sh`` (None: it has none): ``plan`` is an
    image's (``image_plan(...).plan``) or a container node's (its ``image`` step's image plan)."""
    image = next((s.params for s in plan.steps if s.kind == "image"), None)
    if image is not None:
        plan = image.image.plan
    return f"{plan.prefix}/.envbuild/files/{PREPARE}" if run_time_steps(plan) else None


def stage_name(plan: Plan) -> str:
    """The folder a Slurm job keeps the image's prepared run-time data in, named for the image's
    plan (as ``prepare_script``: an image's plan or a container node's): a job for another image
    (a changed lock, recipe or base) prepares its own instead of reusing what an older image's
    steps wrote."""
    image = next((s.params for s in plan.steps if s.kind == "image"), None)
    if image is not None:
        plan = image.image.plan
    return f"envbuild-data-{plan_digest(plan)[:12]}"


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
        "conda": [], "modules": [], "container_engines": {},
        # an image without a CUDA toolkit has none: the target's nvcc is never assumed there
        # (``refine`` fills only what was not looked at), so its CUDA builds are judged as such
        "missing": {} if base.nvcc else {"nvcc": f"{base.image} has no CUDA toolkit"},
    })


def torch_variant(recipe, plan: Plan, facts: NodeFacts | None = None) -> str | None:
    """``cu113``/``cpu`` from the planned torch requirement, else the variant preflight reads
    for the recipe's torch on ``facts`` (``envbuild.compat.context.pick_torch``: the recipe's
    tag, or the PyPI build's, e.g. torch 2.11.0's cu130, preinstalled or not): the reading that
    plans the CUDA build steps (``envbuild.plan.build.torch_cuda``) also picks the base image,
    so a CUDA build never gets a CPU base (issue 49); without ``facts``, the recipe's pin."""
    for s in plan.steps:
        if s.kind == "pip_install":
            for r in s.params.requirements:
                if r.name.lower() == "torch" and "+" in r.version:
                    return r.version.split("+", 1)[1]
    if facts is not None:
        from envbuild.compat.context import pick_torch

        pick = pick_torch(recipe, facts)
        return pick.tag if pick is not None and pick.tag != "pypi" else None
    pkg = recipe.package("torch")
    return pkg.cuda if pkg is not None and pkg.cuda not in (None, "auto") else None


def tooling(recipe, base: BaseImage) -> Step | None:
    """apt packages the base image lacks for the plan (the CUDA devel images: Python)."""
    pkgs = []
    py = recipe.python
    if base.apt_python:
        pkgs += [f"python{py}", f"python{py}-venv", f"python{py}-dev"]
    elif base.provides:  # NGC: Python is there; its venv module may not be
        pkgs += [f"python{py}-venv"]
    if recipe.sources and base.apt_python:
        pkgs += ["git", "ca-certificates"]
    if not pkgs:
        return None
    return Step(id="image-tooling", title="Python and git for the base image",
                params=P.SystemPackagesParams(packages=pkgs),
                reason=f"{base.image} has no Python {py} venv (or git) of its own")


def host_env(recipe, target, plan: Plan) -> dict[str, str]:
    """The env file's variables that are the target node's, not the environment's: the
    target's ``env`` (NCCL/UCX settings, a topology file on the host) and the cache folders
    from its ``cache_dir``, unless the recipe sets them itself. An image carries them as a
    file to pass at run time on such a node, never in its ``ENV``."""
    ef = next((s.params for s in plan.steps if s.kind == "env_file"), None)
    if ef is None:
        return {}
    host = set(target.env) | ({"PIP_CACHE_DIR", "TMPDIR"} if target.cache_dir else set())
    out = {k: v for k, v in ef.vars.items() if k in host and k not in recipe.env}
    for k, v in out.items():  # docker --env-file takes a line per variable, values verbatim
        if "\n" in v or "\r" in v:
            raise InputError(f"target {target.name}: env {k} holds a line break",
                             hint="an environment value is one line")
    return out


def labels(recipe, target, base: BaseImage, plan: Plan, lock_text: str | None = None) -> dict[str, str]:
    """The image's labels: OCI's, and envbuild's recipe, target, lock, plan and sources. Of the
    lock, two: ``io.envbuild.lock.sha256`` is the sha256 of the lock file the image carries
    (``envbuild.lock``: what ``sha256sum`` prints for it; ``none`` without one) and
    ``io.envbuild.lock.digest`` the lock's canonical digest (over its model, as the plan, run
    records and reports name it)."""
    out = {
        "org.opencontainers.image.title": f"envbuild {recipe.name} ({target.name})",
        "org.opencontainers.image.description": " ".join(recipe.title.split()),
        "org.opencontainers.image.base.name": base.image,
        **({"org.opencontainers.image.base.digest": base.digest} if base.digest else
           {"io.envbuild.base.pinned": "no: a tag, which its registry may move or delete; "
                                       "render with --base NAME@sha256:HEX to pin it"}),
        "org.opencontainers.image.version": __version__,
        "io.envbuild.recipe": recipe.name,
        "io.envbuild.target": target.name,
        "io.envbuild.lock.sha256": sha256_text(lock_text) if lock_text is not None else "none",
        "io.envbuild.lock.digest": plan.lock_digest or "none",
        "io.envbuild.plan.sha256": plan_digest(plan),
        "io.envbuild.version": __version__,
    }
    url = recipe.published.url
    # the OCI spec's source is a URL; envbuild's own reference is "envbuild:README.md#..."
    out["org.opencontainers.image.source" if url.startswith(("https://", "http://")) else "io.envbuild.published"] = url
    for s in plan.steps:
        if s.kind == "git_source":
            out[f"io.envbuild.source.{s.params.name}"] = s.params.sha or s.params.ref
    return out


def planned_wheels(plan: Plan, lock) -> dict[str, str]:
    """``{file: sha256}`` of the locked file of every requirement the plan's pip steps install."""
    from envbuild.lock.schema import normalize

    wanted = {(normalize(r.name), r.version.split("+")[0]) for s in plan.steps
              if s.kind in ("pip_tooling", "pip_install") for r in s.params.requirements}
    return {e.dist.filename: e.dist.sha256 for e in [*getattr(lock, "tooling", []), *getattr(lock, "packages", [])]
            if e.dist is not None and (normalize(e.name), e.version.split("+")[0]) in wanted}


def image_plan(recipe, target, lock, *, lock_text: str | None = None, base: str | None = None,
               wheelhouse: bool = False, smoke_preset: str = "tiny", inventory=None,
               offline: bool = False) -> P.ImagePlan:
    """Plan ``recipe`` for an image on ``target``'s hardware. ``wheelhouse``: locked wheels
    from a wheelhouse come from the context's ``wheelhouse/`` folder (mounted at build);
    ``offline`` (a bundle's node): every locked wheel comes from there, pip never asks an index."""
    rec = image_recipe(recipe)
    # the node's scratch disk (cache_dir: PIP_CACHE_DIR, TMPDIR under /mnt) is not in the image
    image_target = target.model_copy(update={"cache_dir": None}) if target.cache_dir else target
    opts = PlanOptions(prefix=f"{IMAGE_ROOT}/{recipe.name}", host="image", smoke=True,
                       smoke_preset=smoke_preset, wheelhouse=WHEELHOUSE if wheelhouse or offline else None,
                       inventory=inventory, no_index=offline)  # {inventory.*} of the nodes (patches)
    # first pass on the target's facts: the torch variant decides the base image
    first_facts = image_facts(image_target, choose(recipe, None, base), recipe.python)
    first = resolve_environment(rec, image_target, first_facts, lock, opts).plan
    chosen = choose(recipe, torch_variant(recipe, first, first_facts), base)
    plan = resolve_environment(rec, image_target, image_facts(image_target, chosen, recipe.python),
                               lock, opts).plan
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
    if offline and lock is not None:
        wheels = sorted(planned_wheels(plan, lock))
    elif wheelhouse and lock is not None:
        wheels = sorted(p.dist.filename for p in getattr(lock, "packages", [])
                        if getattr(p, "from_wheelhouse", False) and p.dist is not None)
    return P.ImagePlan(recipe=recipe.name, title=recipe.title, target=target.name,
                       gpus=bool(getattr(target, "gpus", None)), base=chosen, plan=plan,
                       tooling=tooling(recipe, chosen), lock_text=lock_text, wheelhouse=wheels,
                       notes=notes, host_env=host_env(recipe, image_target, plan),
                       labels=labels(recipe, target, chosen, plan, lock_text))


@lru_cache(maxsize=1)  # envbuild's own files do not change while it runs: read once, not per node
def code_digest() -> str:
    """The sha256 of envbuild's code that turns an image plan into its build context (the
    renderers and the step -> actions translation) and of every file of its own a context may
    copy (the node side, the smoke scripts): read from the files, so a change to any of them
    changes every context digest and the images are built again."""
    files = sorted(f for folder in IMAGE_CODE for f in folder.rglob("*")
                   if f.is_file() and f.suffix in (".py", ".sh", ".json") and "__pycache__" not in f.parts)
    return sha256_text(canonical_json({f.relative_to(PACKAGE).as_posix(): sha256_file(f) for f in files}))


def context_digest(ip: P.ImagePlan, wheels: dict[str, str]) -> str:
    """What an image's build context is made from: its plan (``ip``), the locked wheels it
    takes (name -> sha256) and envbuild's code that renders it (``code_digest``)."""
    return sha256_text(canonical_json({"image": ip.model_dump(mode="json"), "wheels": dict(sorted(wheels.items())),
                                       "code": code_digest(), "version": __version__}))
