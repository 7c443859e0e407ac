"""The node plan of the container backend: the recipe's image built on the node, checked in it.

For a recipe whose environment is a container (megatronapp, megatron-deepspeed-slurm) and for
any recipe provisioned with ``--backend container [--base IMAGE]``, a node gets:

    preflight -> [bundle] -> image -> [image-import] -> import-check -> smoke

- ``image``: the recipe's image plan (``envbuild.plan.image.image_plan``: typed, the image's
  own node plan nested), carried by the step with the locked wheels by name and sha256. The
  build context is rendered from it when the step becomes actions (``envbuild.render.steps``:
  the same context ``envbuild render --format dockerfile`` writes), written on the node and
  built by the node's engine (podman, else docker: ``facts.container_engines``). A changed
  lock changes the image plan, so the step's digest and the image's
  ``io.envbuild.context.sha256`` label (``context_digest``: the plan, the wheels, and the code
  that renders it): the image is built again; the step's effect is the image with its planned
  labels on the node.
- from an offline bundle (``provision --bundle``): the bundle's ``node/`` folder is staged on the
  node first (``bundle``, as a node plan's), the image's pip steps install ``--no-index`` from
  the context's wheels, linked from the bundle's, and the base image, when the bundle carries it
  (``bundle --image-tar``), is loaded from there before the build (``ImageParams.base_archive``)
  instead of pulled. Git sources and data files of the image are still fetched by its build:
  ``envbuild.bundle.unpack.Opened.check_plan`` refuses such a plan, naming them.
- ``image-import`` (Slurm targets with pyxis only): ``enroot import`` of the image into
  ``<prefix>/envbuild-<recipe>-<target>.sqsh``, the path ``envbuild launch`` passes to
  ``srun --container-image`` (``sqsh_path``; ``envbuild.launch.job.default_image``).
- ``import-check``: the image's verify script (imports, locked versions, source trees) in a
  throwaway container without network; its output is kept like a smoke run's.
- ``smoke``: the smoke runs planned for the image, each in its own container, the node's smoke
  folder mounted where they expect it; outputs come back to the run directory.

Pure, except that envbuild's own code is read for its sha256 (``envbuild.plan.image.
code_digest``: it is part of what a context is made from, not of the node).

    >>> from envbuild.recipes import load_recipe
    >>> image_tag(load_recipe("cpu-reference"), "local")
    'localhost/envbuild/cpu-reference:local'
"""

from __future__ import annotations

from envbuild.compat.rules_container import build_engine, pyxis
from envbuild.plan import params as P
from envbuild.plan.build import PlanOptions, default_prefix, expand_home
from envbuild.plan.image import context_digest, image_plan, run_time_note
from envbuild.plan.model import Decision, Plan, Step
from envbuild.plan.placeholders import inventory_values
from envbuild.plan.smoke import native_run, node_runs, torch_variant

SCHEDULED = ("slurm", "pbs", "kubernetes")  # launchers whose benchmark is a job, not a command


def image_tag(recipe, target_name: str) -> str:
    """The tag of the recipe's image on a node (``localhost/``: never looked up in a registry)."""
    return f"localhost/envbuild/{recipe.name}:{target_name}"


def sqsh_path(prefix: str, recipe_name: str, target_name: str) -> str:
    """Where the enroot import goes and what ``envbuild launch`` passes to pyxis: an absolute
    path in the prefix (pyxis reads a name starting with '/' as a file, envbuild.launch.pyxis)."""
    return f"{prefix.rstrip('/')}/envbuild-{recipe_name}-{target_name}.sqsh"


def container_plan(recipe, target, facts, lock, opts: PlanOptions) -> Plan:
    """The container backend's plan for one node (see the module docstring)."""
    prefix = expand_home(opts.prefix or default_prefix(recipe, target), facts)
    lock_text = None
    if lock is not None and hasattr(lock, "model_dump"):
        from envbuild.lock.serialize import image_lock_text

        lock_text = image_lock_text(lock, recipe.name, target.name)
    staged = (opts.bundle.model_copy(update={"dir": f"{prefix.rstrip('/')}/.envbuild/bundle"})
              if opts.bundle is not None else None)
    ip = image_plan(recipe, target, lock, lock_text=lock_text, base=opts.base,
                    wheelhouse=bool(opts.wheelhouse), smoke_preset=opts.smoke_preset,
                    inventory=opts.inventory if opts.inventory is not None else inventory_values([facts]),
                    offline=staged is not None)
    hashes = {p.dist.filename: p.dist.sha256
              for p in [*(getattr(lock, "tooling", None) or []), *(getattr(lock, "packages", None) or [])]
              if getattr(p, "dist", None) is not None and p.dist.filename}
    wheels = {name: hashes.get(name) or "" for name in ip.wheelhouse}
    wheelhouse = f"{staged.dir}/wheels" if staged is not None else opts.wheelhouse
    archive = (f"{staged.dir}/{staged.images[ip.base.image]}"
               if staged is not None and ip.base.image in staged.images else None)
    digest = context_digest(ip, wheels)

    found = build_engine(facts.container_engines)
    engine = P.Engine(name=found or "docker", env=dict(opts.engine_env), build_args=list(opts.engine_args))
    decisions = [
        Decision(subject="container-engine", outcome=engine.name,
                 reason=(f"{found} is on the node (podman preferred: no daemon)" if found else
                         "no podman or docker in the node's facts: docker, as the published "
                         "instructions build (preflight refuses the node)")),
        Decision(subject="base-image", outcome=ip.base.image, reason=ip.base.why, source=ip.base.source),
        *ip.plan.decisions,
    ]
    tag = image_tag(recipe, target.name)
    labels = {P.CONTEXT_LABEL: digest, "io.envbuild.plan.sha256": ip.labels["io.envbuild.plan.sha256"],
              "io.envbuild.recipe": recipe.name}
    sources = {s.params.name: s.params.dest for s in ip.plan.steps if s.kind == "git_source"}
    verdict = opts.verdict or P.PreflightParams(feasible=True, summary="not checked")
    steps = [Step(id="preflight", title="Preflight compatibility check", params=verdict,
                  reason="refuse an infeasible node before building")]
    if staged is not None:
        steps.append(Step(id="bundle", title=f"offline bundle {staged.digest[:12]} ({len(staged.files)} files)",
                          params=staged,
                          reason="no network on the node: the image's wheels"
                                 + (" and its base image" if archive else "") + " come from the bundle, "
                                 "copied here and hash-checked before anything is built"))
    steps.append(_image_step(ip, engine, tag, digest, prefix, wheelhouse if wheels else None, wheels, labels,
                             archive, offline=staged is not None))
    if pyxis(target):
        steps.append(Step(
            id="image-import", title=f"enroot import of {tag}",
            params=P.ImageImportParams(engine=engine, tag=tag, path=sqsh_path(prefix, recipe.name, target.name),
                                       context_sha256=digest),
            reason=f"{target.name} runs jobs with srun --container-image (pyxis), which takes a "
                   "squashfs imported by enroot, not an image of the node's engine "
                   "(the recipe's pyxis-local-image deviation)"))
    gpus = bool(facts.gpus)
    steps.append(Step(
        id="import-check", title="Import check inside the image",
        params=P.ImageCheckParams(engine=engine, tag=tag, context_sha256=digest,
                                  modules=list(recipe.import_check),
                                  argv=["sh", f"{ip.files_dir}/verify.sh"],
                                  dir=f"{prefix.rstrip('/')}/.envbuild/image/check", gpus=gpus),
        reason="the image's verify script: every module imports, every locked package at its "
               "version, every source tree at its commit; fail now, not at the first training step"))
    smoke = _smoke_step(recipe, target, facts, ip, engine, tag, digest, prefix, sources) if opts.smoke else None
    if smoke is not None:
        steps.append(smoke)
    return Plan(recipe=recipe.name, target=target.name, host=opts.host, prefix=prefix,
                backend="container", lock_digest=ip.plan.lock_digest, facts_origin=facts.origin,
                decisions=decisions, steps=steps)


def _image_step(ip, engine: P.Engine, tag: str, digest: str, prefix: str, wheelhouse: str | None,
                wheels: dict[str, str], labels: dict[str, str], archive: str | None, *, offline: bool) -> Step:
    """The image built on the node from its plan's context, the base loaded from the bundle
    where it carries it; the reason says what makes it build again and what the image fetches
    when a container starts."""
    run_time = run_time_note(ip)  # data the image fetches when a container starts (no sha256 recorded)
    notes = "; ".join(ip.notes + ([run_time] if run_time else []))
    return Step(
        id="image", title=f"image {tag} ({engine.name} build from {ip.base.image})",
        params=P.ImageParams(engine=engine, tag=tag,
                             context_dir=f"{prefix.rstrip('/')}/.envbuild/image/context",
                             context_sha256=digest, image=ip,
                             wheelhouse=wheelhouse, wheels=wheels,
                             labels=labels, base_archive=archive),
        reason=(f"the recipe's environment is an image, built here from its plan's context "
                f"(the one `envbuild render --format dockerfile` writes) with the node's {engine.name}; "
                f"a changed lock changes the image plan and its digest, and the image is built again"
                + (f"; {ip.base.image} is loaded from the bundle ({archive}), not pulled" if archive else "")
                + ("; pip installs --no-index from the bundle's wheels" if offline else "")
                + (f"; {notes}" if notes else "")))


def _smoke_step(recipe, target, facts, ip, engine: P.Engine, tag: str, digest: str, prefix: str,
                sources: dict[str, str]) -> Step | None:
    """The smoke runs planned for the image, each in its own container (None: the image plan has
    no smoke step). A recipe whose benchmark is a scheduler's job skips the native run: ``envbuild
    launch`` runs it."""
    smoke = next((s for s in ip.plan.steps if s.kind == "smoke"), None)
    if smoke is None:
        return None
    gpus = bool(facts.gpus)
    bench = recipe.benchmark.model_dump(mode="json") if recipe.benchmark else None
    params = {"kinds": smoke.params.kinds, "preset": smoke.params.preset}
    runs = node_runs(ip.prefix, params, bench, gpus=len(facts.gpus), sources=sources, output=recipe.output_of(None),
                     torch=torch_variant(ip.plan.decisions))
    skip = native_run(bench, gpus=len(facts.gpus), sources=sources, cwd=smoke.params.dir,
                      output=recipe.output_of(None)).get("skip")
    if recipe.launcher in SCHEDULED:
        runs = [r for r in runs if r["name"] != "native"]
        skip = (f"the recipe's benchmark is a {recipe.launcher} job: `envbuild launch {recipe.name} "
                f"--target {target.name} --submit` runs it")
    return Step(
        id="smoke", title="Smoke benchmark inside the image",
        params=P.ImageSmokeParams(engine=engine, tag=tag, context_sha256=digest,
                                  kinds=list(smoke.params.kinds), preset=smoke.params.preset,
                                  dir=f"{prefix.rstrip('/')}/.envbuild/smoke", image_dir=smoke.params.dir,
                                  runs=[P.SmokeRun(**r) for r in runs], native_skip=skip,
                                  gpus=gpus, shm_size=target.shm_size),
        reason="prove the image trains: each run in its own container, without network")
