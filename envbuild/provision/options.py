"""What ``envbuild provision`` was asked, checked before anything runs, and what the planner
is given from it (shared with ``envbuild plan``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild.bundle import offline as bundle_offline
from envbuild.connect.nodes import Node
from envbuild.connect.selection import NodeSelection
from envbuild.errors import InputError
from envbuild.facts.uvbin import controller_uv as found
from envbuild.plan.build import PlanOptions, prefix_problem
from envbuild.plan.model import Plan
from envbuild.plan.resolve import default_backend, fetch_urls
from envbuild.recipes import default_recipe, load_recipe
from envbuild.targets import load_target


@dataclass
class ProvisionOptions:
    """What ``envbuild provision`` was asked to do."""

    target: str
    recipe: str | None = None
    hosts: str | None = None
    inventory: str | None = None
    backend: str | None = None
    prefix: str | None = None
    dry_run: bool = False
    git_mirror: str | None = None
    wheelhouse: str | None = None
    data_mirror: str | None = None  # the recipe's data files (DIR/<file>), readable on the nodes
    lock: str | None = None
    smoke: bool = True
    smoke_preset: str = "tiny"  # tiny (seconds) or 350m (a ~355M GPT: MFU), on a GPU where the node has one
    json_lines: bool = False
    insecure: bool = False  # no host key checking (test nodes only)
    identity_file: str | None = None
    known_hosts: list[str] = field(default_factory=list)  # known_hosts files (default: ssh's)
    conda_channel: str | None = None  # --backend conda: channel URL or local channel folder
    conda_packages: list[str] = field(default_factory=list)  # --backend conda: conda specs
    locked: bool = False  # refuse to create a missing lock (a stale one is always refused)
    allow_unverified: list[str] = field(default_factory=list)  # packages that may lack a hash
    force: bool = False  # run every step again (markers and effects notwithstanding)
    from_step: str | None = None  # run again from this step id, and every step after it
    bundle: str | None = None  # offline: everything from this bundle (envbuild.bundle.offline)
    bundle_sha256: str | None = None  # --bundle-sha256: the bundle file's digest, pinned by the user
    trusted_keys: tuple[str, ...] = ()  # --trusted-key: public keys whose signed provenance pins the bundle
    provenance: str | None = None  # --provenance: the envelope (default <bundle>.intoto.jsonl)
    # a fleet (envbuild.bundle.fleet): wheels downloaded once on the controller and pushed to the
    # nodes; None: when there is more than one SSH node
    push_wheels: bool | None = None
    # --fanout K: the pushed wheels' archive goes down a K-ary tree of the nodes, each node that
    # holds a checked copy sending it on (envbuild.provision.stagetree); None: from the controller
    fanout: int | None = None
    node_identity: str | None = None  # --node-identity: a key path on the nodes, for node to node
    # --backend container (envbuild.plan.container): the image's base, and how the node's engine
    # is called: extra `build` options (--isolation chroot) and NAME=VALUE environment entries
    base: str | None = None
    engine_args: list[str] = field(default_factory=list)
    engine_env: list[str] = field(default_factory=list)
    installer: str = "auto"  # auto | pip | uv (envbuild.plan.installer)
    argv: list[str] = field(default_factory=list)


@dataclass
class ProvisionOutcome:
    run_dir: Path
    status: str  # ok | failed | partial
    exit_code: int
    results: dict[str, dict]
    command: str  # the ansible-playbook command line for a run by hand
    plans: dict[str, Plan]
    verdict: str | None = None  # a finished run's report verdict: PASS | NOT JUDGED | FAIL
    verdict_notes: list[str] = field(default_factory=list)  # its reasons, then what was not judged
    # how to enter the environment on each node that finished ok (envbuild.plan.enter)
    enter: dict[str, str] = field(default_factory=dict)


def selection(opts: ProvisionOptions) -> NodeSelection:
    """The nodes provision was asked for, and how to reach them (``envbuild.connect.selection``)."""
    return NodeSelection(hosts=opts.hosts, inventory=opts.inventory, identity_file=opts.identity_file,
                         known_hosts=tuple(opts.known_hosts), insecure=opts.insecure)


def select_nodes(opts: ProvisionOptions, target) -> list[Node]:
    """--hosts, --inventory, or the controller itself for a local target."""
    if opts.hosts and opts.inventory:
        raise InputError("give --hosts or --inventory, not both")
    return selection(opts).nodes(default_local=target.name == "local" or target.from_facts,
                                 needs=f"target {target.name!r} needs nodes (or use --target local)")


def load(opts: ProvisionOptions, on_target: Callable[[object], None] | None = None):
    """(recipe, target) after checking the options; ``on_target(target)`` is called once the
    options, the target and a named recipe are known good, before the default recipe is read
    (provision starts reading the nodes there, see ``Early``)."""
    recipe = load_recipe(opts.recipe) if opts.recipe else None
    target = load_target(opts.target)
    if opts.backend not in (None, "venv", "conda", "container"):
        raise InputError(f"unknown backend {opts.backend!r}", hint="use --backend venv, conda or container")
    _check_engine_options(opts)
    for name, value in (("--wheelhouse", opts.wheelhouse), ("--git-mirror", opts.git_mirror)):
        if value and not Path(value).is_dir():
            raise InputError(f"{name} {value}: no such folder", hint=f"pass an existing folder to {name}")
    channel = opts.conda_channel
    if channel and "://" not in channel and "/" in channel and not Path(channel).is_dir():
        raise InputError(f"conda channel {channel}: no such folder",
                         hint="give a channel folder (with noarch/repodata.json), a URL or a channel name")
    if opts.force and opts.from_step:
        raise InputError("give --force or --from-step, not both",
                         hint="--force runs every step again; --from-step ID runs again from step ID")
    if opts.prefix and opts.prefix.replace("{node}", "").count("{") + opts.prefix.replace("{node}", "").count("}"):
        raise InputError(f"--prefix {opts.prefix}: the only placeholder is {{node}}",
                         hint="e.g. --prefix /scratch/envs/{node} gives each node its own folder")
    if opts.prefix and not opts.prefix.startswith(("/", "~/")):
        raise InputError(f"--prefix {opts.prefix}: not an absolute path",
                         hint="give an absolute path, or one under the node's home as ~/...")
    if opts.prefix and (why := prefix_problem(opts.prefix.replace("{node}", "node"))):
        raise InputError(f"--prefix {opts.prefix}: {why}",
                         hint="give the environment a folder of its own, e.g. /opt/envs/<recipe> or ~/.envbuild/envs/<recipe>")
    if opts.lock and not Path(opts.lock).is_file():
        raise InputError(f"--lock {opts.lock}: no such file",
                         hint="envbuild lock writes LOCKDIR/<recipe>/<target>.lock (--lockdir, $ENVBUILD_LOCKDIR)")
    if recipe is not None:
        _check_conda(opts, recipe)
    if on_target is not None:
        on_target(target)
    if recipe is None:
        recipe = default_recipe()
        _check_conda(opts, recipe)
    return recipe, target


def _check_conda(opts: ProvisionOptions, recipe) -> None:
    if (opts.conda_channel or opts.conda_packages) and (opts.backend or recipe.environment.kind) != "conda":
        raise InputError("conda channel/packages given but the environment is not conda",
                         hint="add --backend conda")


def plan_options(opts: ProvisionOptions, recipe, lock: object | None = None) -> PlanOptions:
    """The planner's options from provision's (shared with ``envbuild plan``)."""
    return PlanOptions(prefix=opts.prefix, backend=default_backend(recipe, opts.backend), git_mirror=opts.git_mirror,
                       wheelhouse=opts.wheelhouse, smoke=opts.smoke, smoke_preset=opts.smoke_preset,
                       conda_channel=opts.conda_channel, conda_packages=tuple(opts.conda_packages),
                       fetch_urls=fetch_urls(recipe, opts.git_mirror, lock),
                       allow_unverified=tuple(opts.allow_unverified),
                       bundle=bundle_offline.plan_bundle(opts), data_mirror=opts.data_mirror,
                       installer=opts.installer, uv=controller_uv(opts.installer),
                       **_container_options(opts, recipe))


def controller_uv(installer: str):
    """The controller's uv (``envbuild.facts.uvbin``) the planner may push; None for pip."""
    if installer == "pip":
        return None

    return found()[1]


def _check_engine_options(opts: ProvisionOptions) -> None:
    """--base, --engine-arg and --engine-env only with the container backend (the container
    recipes' default); --engine-env entries are NAME=VALUE."""
    if (opts.base or opts.engine_args or opts.engine_env) and opts.backend not in (None, "container"):
        raise InputError(f"--base/--engine-arg/--engine-env given with --backend {opts.backend}",
                         hint="they build the image on the node: use --backend container")
    for entry in opts.engine_env:
        name = entry.partition("=")[0]
        if "=" not in entry or not name.replace("_", "a").isalnum() or name[:1].isdigit():
            raise InputError(f"--engine-env {entry!r}: not NAME=VALUE",
                             hint="e.g. --engine-env CONTAINERS_STORAGE_CONF=/srv/podman/storage.conf")
        from envbuild.redact import is_secret_name

        if is_secret_name(name):  # the plan (and plan.json in the run) carries these values
            raise InputError(f"--engine-env {name}: a secret-named variable would be written into the plan",
                             hint="set it in the node's own environment (or the engine's config) instead")


def _container_options(opts: ProvisionOptions, recipe) -> dict:
    """PlanOptions fields of the container backend (the default of a container recipe)."""
    backend = default_backend(recipe, opts.backend)
    if backend != "container":
        if opts.base or opts.engine_args or opts.engine_env:
            raise InputError(f"--base/--engine-arg/--engine-env: {recipe.name}'s environment is a "
                             f"{recipe.environment.kind}, not an image", hint="add --backend container")
        return {}
    return {"base": opts.base, "engine_args": tuple(opts.engine_args),
            "engine_env": dict(e.split("=", 1) for e in opts.engine_env)}


def node_prefix(prefix: str | None, node: str) -> str | None:
    """``--prefix`` for one node: ``{node}`` becomes the node's name (nodes that share a
    filesystem, such as loopback test nodes, each get their own environment)."""
    import re

    return prefix.replace("{node}", re.sub(r"[^A-Za-z0-9._-]", "_", node)) if prefix else prefix


def check_from_step(plan: Plan, step_id: str | None) -> None:
    """``--from-step ID`` names a step of the plan (InputError listing the ids otherwise)."""
    ids = [s.id for s in plan.steps]
    if step_id is not None and step_id not in ids:
        raise InputError(f"--from-step {step_id}: no such step in the plan for {plan.host}",
                         hint=f"the steps are: {', '.join(ids)}")
