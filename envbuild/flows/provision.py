"""The provision flow: a recipe installed onto nodes (facts, preflight, lock, plan, Ansible,
results), as ``envbuild provision`` asks.

``provision(ProvisionRequest(...)) -> ProvisionOutcome``: the options that only make sense
together are checked first (``--trusted-key``/``--provenance`` with a bundle, ``--node-identity``
with a fan-out, a fan-out of pushed wheels), then the provision package's options are made from
the request and ``envbuild.provision.provision`` runs the phases (its module docstring: the
exit codes, every node on its own). The outcome is the provision package's
``ProvisionOutcome``: the run directory, status and exit code, per-node results, the plans and
the ansible-playbook command (a dry run), the verdict and how to enter each environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from envbuild.errors import InputError
from envbuild.flows.nodes import NodesRequest
from envbuild.provision import ProvisionOptions, ProvisionOutcome
from envbuild.provision import provision as run_provision


@dataclass(frozen=True)
class ProvisionRequest:
    """What ``envbuild provision`` was asked: the ``target`` and ``recipe`` (names or YAML paths;
    None: the embedded reference), the nodes (``reach``: ``hosts`` or ``inventory``, reached
    with its SSH key, ``known_hosts`` files, or ``insecure``ly), the environment (``backend``,
    ``prefix``, conda's ``conda_channel``/``conda_packages``, a container's ``base``,
    ``engine_args``, ``engine_env``), where things come from (``git_mirror``, ``wheelhouse``,
    ``data_mirror``, ``lock``/``locked``, an offline ``bundle`` pinned by ``bundle_sha256`` or
    ``trusted_keys`` and its ``provenance``), how wheels reach the nodes (``push_wheels``,
    ``fanout``, ``node_identity``, ``installer``), what runs (``dry_run``, ``smoke`` and
    ``smoke_preset``, ``force``, ``from_step``, ``allow_unverified``), ``json_lines`` events
    on stdout, and the command line (``argv``) recorded in the run."""

    target: str
    recipe: str | None = None
    reach: NodesRequest = NodesRequest()
    backend: str | None = None
    prefix: str | None = None
    conda_channel: str | None = None
    conda_packages: tuple[str, ...] = ()
    dry_run: bool = False
    git_mirror: str | None = None
    wheelhouse: str | None = None
    data_mirror: str | None = None
    lock: str | None = None
    locked: bool = False
    allow_unverified: tuple[str, ...] = ()
    smoke: bool = True
    smoke_preset: str = "tiny"
    json_lines: bool = False
    force: bool = False
    from_step: str | None = None
    bundle: str | None = None
    bundle_sha256: str | None = None
    trusted_keys: tuple[str, ...] = ()
    provenance: str | None = None
    push_wheels: bool | None = None
    fanout: int | None = None
    node_identity: str | None = None
    base: str | None = None
    engine_args: tuple[str, ...] = ()
    engine_env: tuple[str, ...] = ()
    installer: str = "auto"
    argv: tuple[str, ...] = ()


def _check(request: ProvisionRequest) -> None:
    """Options that only make sense with another one (InputError, exit 2, before anything runs)."""
    if (request.trusted_keys or request.provenance) and not request.bundle:
        raise InputError("--trusted-key and --provenance check a --bundle; none was given",
                         hint="add --bundle FILE, or drop them")
    if request.node_identity and not request.fanout:
        raise InputError("--node-identity logs one node in to the next for --fanout; no --fanout was given",
                         hint="add --fanout K, or drop --node-identity")
    if request.fanout and request.push_wheels is False:
        raise InputError("--fanout sends the pushed wheels down a tree; --no-push-wheels pushes none",
                         hint="drop one of them")


def options(request: ProvisionRequest) -> ProvisionOptions:
    """The provision package's options, as the request gives them."""
    reach = request.reach
    return ProvisionOptions(target=request.target, recipe=request.recipe, hosts=reach.hosts,
                            inventory=reach.inventory, backend=request.backend, prefix=request.prefix,
                            conda_channel=request.conda_channel, conda_packages=list(request.conda_packages),
                            dry_run=request.dry_run, git_mirror=request.git_mirror, wheelhouse=request.wheelhouse,
                            lock=request.lock, locked=request.locked, data_mirror=request.data_mirror,
                            allow_unverified=list(request.allow_unverified), smoke=request.smoke,
                            smoke_preset=request.smoke_preset, json_lines=request.json_lines, force=request.force,
                            from_step=request.from_step, bundle=request.bundle, bundle_sha256=request.bundle_sha256,
                            push_wheels=request.push_wheels, trusted_keys=tuple(request.trusted_keys),
                            provenance=request.provenance, insecure=reach.insecure,
                            identity_file=reach.identity_file, known_hosts=list(reach.known_hosts),
                            argv=list(request.argv), base=request.base, engine_args=list(request.engine_args),
                            engine_env=list(request.engine_env), installer=request.installer,
                            fanout=request.fanout, node_identity=request.node_identity)


def provision(request: ProvisionRequest, *, echo: Callable[[str], None] | None = None) -> ProvisionOutcome:
    """Check the request, then provision (see the module docstring). ``echo`` is the progress
    display, told each event and message as it happens (None: ``json_lines`` events, or none)."""
    _check(request)
    return run_provision(options(request), echo=echo)
