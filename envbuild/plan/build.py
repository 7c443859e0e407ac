"""Build the plan for one node: a pure function of (recipe, target, facts, lock, options).

The order is the order a careful person would follow on the node:

    preflight -> system packages -> environment -> pip tooling -> torch -> locked PyPI
    packages -> for each git source: clone at SHA, patches, build, install (Apex: wheel build)
    -> environment file -> import check -> smoke

Every decision taken from facts (torch CUDA variant, Apex check, build parallelism, option
syntax) is recorded as a ``Decision`` with its reason, and repeated in the step's ``reason``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from envbuild.compat.commits import apex_commit
from envbuild.errors import InputError
from envbuild.facts.model import Interpreter, NodeFacts, UvBinary
from envbuild.fsio import canonical_json, sha256_text
from envbuild.lock.schema import normalize
from envbuild.lock.serialize import lock_digest
from envbuild.lock.tooling import Tool, pip_release, tooling
from envbuild.node import treecache
from envbuild.patches import apex_build
from envbuild.patches.apex_options import option_row, submodules_for
from envbuild.plan import params as P
from envbuild.plan.installer import choose_installer, step_installer
from envbuild.plan.model import Decision, Plan, Step
from envbuild.plan.packages import (LockedPackage, downgrades, locked_packages, torch_closure,
                                    torch_requirement)
from envbuild.plan.placeholders import fill_patch, inventory_values, placeholders
from envbuild.plan.smoke import native_run, node_runs, smoke_dir, torch_variant
from envbuild.recipes.schema import GitSource, Recipe
from envbuild.targets.schema import Target
from envbuild.versions import cuda_of_tag, vtuple



@dataclass(frozen=True)
class PlanOptions:
    """What the user chose on the command line."""

    prefix: str | None = None
    backend: str | None = None  # venv | conda; None = the recipe's environment kind
    git_mirror: str | None = None
    wheelhouse: str | None = None
    smoke: bool = True
    smoke_preset: str = "tiny"
    host: str = "local"
    verdict: P.PreflightParams | None = None  # the preflight verdict (envbuild.plan.resolve)
    conda_channel: str | None = None  # conda backend: channel URL or local folder (None: conda-forge)
    conda_packages: tuple[str, ...] = ()  # conda backend: specs; none -> python=<recipe python>
    fetch_urls: dict[str, str] = field(default_factory=dict)  # source URL -> mirror path (resolved)
    fetch_commits: dict[str, str] = field(default_factory=dict)  # "URL@SHA" -> path; before fetch_urls
    node_python: str | None = None  # interpreter for envbuild's helper scripts on the node
    allow_unverified: tuple[str, ...] = ()  # packages that may install without a hash
    # offline (envbuild.bundle): the node's copy of the bundle; every pip call --no-index from
    # its wheels (wheelhouse), every git source from its shallow repositories (fetch_urls)
    bundle: P.BundleParams | None = None
    # a fleet (envbuild.bundle.fleet): the wheels the controller downloaded once and pushes to
    # every node; pip installs --no-index from the node's copy (``src`` -> <prefix>/.envbuild/fleet)
    fleet: P.BundleParams | None = None
    # container backend (envbuild.plan.container): the image's base (None: the recipe's, else
    # chosen by envbuild.compat.base_images), and how the node's engine is called (data, not code)
    base: str | None = None
    engine_args: tuple[str, ...] = ()  # extra options of `<engine> build`
    engine_env: dict[str, str] = field(default_factory=dict)  # environment of engine commands
    # {inventory.<name>} values of the whole run (envbuild.plan.placeholders.inventory_values
    # over every node's facts); None: the node being planned is the whole inventory
    inventory: object | None = None
    data_mirror: str | None = None  # folder of the recipe's data files (DIR/<file>), readable on the node
    # every pip step installs --no-index from ``wheelhouse`` alone (an image built from a bundle:
    # its context's wheels; a node's bundle or fleet says so itself)
    no_index: bool = False
    # package installer (envbuild.plan.installer): auto | pip | uv, and the controller's uv
    # (envbuild.facts.uvbin.controller_uv, found by the resolution; None: pip everywhere)
    installer: str = "auto"
    uv: UvBinary | None = None


SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def verdict_summary(verdict: object) -> P.PreflightParams:
    """The part of a preflight verdict (``envbuild.compat.check.Verdict``) a plan carries."""
    violations = list(getattr(verdict, "violations", []))
    errors = [v for v in violations if v.severity == "error"]
    return P.PreflightParams(
        feasible=bool(getattr(verdict, "feasible", False)),
        summary="; ".join(f"{v.rule}: {v.message}" for v in errors) or "feasible",
        errors=[v.rule for v in errors],
        warnings=[v.rule for v in violations if v.severity == "warning"])


def expand_home(path: str, facts: NodeFacts) -> str:
    """``~/x`` -> ``<home>/x`` with the node's ``$HOME`` fact (unchanged when unknown)."""
    if facts.home and (path == "~" or path.startswith("~/")):
        return facts.home.rstrip("/") + path[1:]
    return path


# folders of the system or of every user: an environment made there (and repaired, i.e. files
# removed and replaced) would take over what the node itself runs on
SYSTEM_DIRS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media",
                         "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
                         "/usr/bin", "/usr/lib", "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/sbin",
                         "/var", "/var/lib", "/var/tmp", "~", "~/"})


def prefix_problem(prefix: str) -> str | None:
    """Why ``prefix`` cannot be an environment's folder (None: it can): a system folder, the home
    folder itself, or a path with ``..`` in it."""
    norm = "/" + "/".join(p for p in prefix.split("/") if p) if prefix.startswith("/") else prefix.rstrip("/") or "~"
    if ".." in prefix.split("/"):
        return "it goes up with '..'"
    if norm in SYSTEM_DIRS or prefix.rstrip("/") in SYSTEM_DIRS:
        return "it is a system folder (or the home folder itself), not one of its own"
    return None


def default_prefix(recipe: Recipe, target: Target) -> str:
    """``<cache_dir>/envbuild/envs/<recipe>`` on targets with a scratch disk, else under ~."""
    base = f"{target.cache_dir.rstrip('/')}/envbuild" if target.cache_dir else "~/.envbuild"
    return f"{base}/envs/{recipe.name}"


def build_plan(recipe: Recipe, target: Target, facts: NodeFacts, lock: object | None = None,
               options: PlanOptions | None = None) -> Plan:
    """The ordered steps for one node. Pure: reads nothing, runs nothing."""
    opts = options or PlanOptions()
    prefix = expand_home(opts.prefix or default_prefix(recipe, target), facts)
    opts = _node_copies(opts, prefix)
    backend = opts.backend or recipe.environment.kind
    if backend not in ("venv", "conda", "container", "module-venv"):
        raise InputError(f"unknown backend {backend!r}", hint="use --backend venv or --backend conda")
    decisions: list[Decision] = []
    steps: list[Step] = _intake_steps(recipe, opts)
    add = steps.append

    interp = facts.python(recipe.python)
    conda = _conda_params(recipe, opts) if backend == "conda" else {}
    installer, why = choose_installer(opts.installer, opts.uv, facts, backend, recipe.python)
    uv_path = uv_dest(facts, prefix, opts.uv) if installer == "uv" else None
    tools = tooling(recipe)
    ensurepip = _ensurepip_by_uv(recipe, backend, uv_path, tools)
    env_params = _environment_params(recipe, facts, opts, backend, prefix, interp, conda,
                                     with_pip=not (ensurepip or _pip_from_uv_only(recipe, lock, uv_path, tools)))
    seed = not env_params.with_pip and not ensurepip and _needs_ensurepip_setuptools(recipe, lock, tools)
    add(Step(id="environment", title=f"{backend} environment, Python {recipe.python}",
             params=env_params, reason=_env_reason(recipe, backend, interp is not None, conda)
             + ("" if env_params.with_pip else
                f"; made --without-pip: uv installs the interpreter's own ensurepip wheels ({', '.join(ensurepip)}) "
                "next" if ensurepip else "; made --without-pip: uv installs the locked pip next")
             + ("" if not seed else ", and the setuptools wheel of the interpreter's own ensurepip")))

    decisions.append(Decision(subject="installer", outcome=f"uv {opts.uv.version}" if uv_path and opts.uv
                              else "pip", reason=why))
    env_at = len(steps)  # the uv step goes right after the environment, if a step uses uv

    pip_version, _ = pip_release(recipe.environment.pip)
    packages, torch = _package_steps(recipe, facts, lock, opts, tools, uv_path,
                                     env_params.system_site_packages, decisions, seed_setuptools=seed,
                                     seed_ensurepip=ensurepip)
    steps += packages
    if uv_path and opts.uv and any(getattr(s.params, "installer", "pip") == "uv" for s in steps):
        steps.insert(env_at, Step(
            id="uv", title=f"uv {opts.uv.version}",
            params=P.UvToolParams(dest=uv_path, version=opts.uv.version, sha256=opts.uv.sha256),
            reason=why))

    for src in git_dependencies(lock) + recipe.ordered_sources():  # dependencies first
        steps.extend(_source_steps(recipe, src, prefix, facts, torch, pip_version, lock, opts,
                                   decisions))

    env_file = f"{prefix}/.envbuild/env.sh"
    add(_env_file_step(recipe, target, env_file))
    if recipe.import_check:
        add(Step(id="import-check", title="Import check",
                 params=P.ImportCheckParams(modules=list(recipe.import_check)),
                 reason="fail now, not at the first training step"))
    if opts.smoke:
        add(_smoke_step(recipe, prefix, env_file, steps, facts, opts, torch_variant(decisions)))

    return Plan(recipe=recipe.name, target=target.name, host=opts.host, prefix=prefix,
                backend=backend, lock_digest=_lock_digest(lock), facts_origin=facts.origin,
                decisions=decisions, steps=steps)


def _node_copies(opts: PlanOptions, prefix: str) -> PlanOptions:
    """The options with a bundle's or a fleet's files where the node holds its copy (under
    ``<prefix>/.envbuild``): offline, the bundle is the only source of wheels, git sources and data."""
    if opts.bundle is not None:  # offline: the node's copy of the bundle is the only source
        staged = opts.bundle.model_copy(update={"dir": f"{prefix.rstrip('/')}/.envbuild/bundle"})
        opts = replace(opts, bundle=staged, wheelhouse=f"{staged.dir}/wheels",
                       fetch_urls={url: f"{staged.dir}/{rel}" for url, rel in staged.git.items()},
                       fetch_commits={key: f"{staged.dir}/{rel}" for key, rel in staged.git_commits.items()},
                       data_mirror=f"{staged.dir}/data")
    if opts.fleet is not None and opts.bundle is None:
        pushed = opts.fleet.model_copy(update={"dir": f"{prefix.rstrip('/')}/.envbuild/fleet"})
        opts = replace(opts, fleet=pushed, wheelhouse=f"{pushed.dir}/wheels")
    return opts


def _intake_steps(recipe: Recipe, opts: PlanOptions) -> list[Step]:
    """The steps before the environment: the preflight verdict, the offline bundle or the
    fleet's wheels, the system packages."""
    steps = []
    verdict = opts.verdict or P.PreflightParams(feasible=True, summary="not checked")
    steps.append(Step(id="preflight", title="Preflight compatibility check", params=verdict,
                      reason="refuse an infeasible node before installing"))
    if opts.bundle is not None:
        steps.append(Step(id="bundle", title=f"offline bundle {opts.bundle.digest[:12]} ({len(opts.bundle.files)} files)",
                          params=opts.bundle,
                          reason="no network on the node: every wheel and pinned commit comes from the "
                                 "bundle, copied here and hash-checked before anything installs"))
    if opts.fleet is not None and opts.bundle is None:
        steps.append(Step(id="wheels", title=f"{len(opts.fleet.files)} wheels pushed from the controller "
                                             f"({opts.fleet.digest[:12]})", params=opts.fleet,
                          reason="a fleet: every wheel downloaded once on the controller (sha256 checked "
                                 "against the lock), pushed to each node; pip installs from them --no-index"))
    if recipe.system_packages:
        steps.append(Step(id="system-packages", title="System packages",
                          params=P.SystemPackagesParams(packages=list(recipe.system_packages)),
                          reason="native prerequisites named by the published instructions"))
    return steps


def _environment_params(recipe: Recipe, facts: NodeFacts, opts: PlanOptions, backend: str, prefix: str,
                        interp: Interpreter | None, conda: dict, *, with_pip: bool) -> P.EnvironmentParams:
    """The environment step's parameters: where, which Python, and the backend's own settings."""
    return P.EnvironmentParams(
        backend=backend, prefix=prefix, python=recipe.python,
        # a container's python3, or the module's python3 once the module is loaded (a path
        # found in the facts is the node's own Python, not the module's)
        interpreter=("python3" if backend in ("container", "module-venv") else
                     interp.path if interp else f"python{recipe.python}"),
        # a container's environment is a venv over the image's python: its preinstalled
        # packages (torch, Apex in NGC images) stay visible, the plan's go into the venv
        system_site_packages=recipe.environment.system_site_packages or backend == "container",
        conda_module=recipe.environment.conda_module, base_image=recipe.environment.base_image,
        conda_channel=opts.conda_channel if backend == "conda" else None,
        conda_tool=(facts.conda[0] if facts.conda else None) if backend == "conda" else None,
        helper_python=(opts.node_python or "python3") if backend == "conda" and not facts.conda else None,
        with_pip=with_pip,
        **conda)


def _package_steps(recipe: Recipe, facts: NodeFacts, lock: object | None, opts: PlanOptions, tools: list[Tool],
                   uv_path: str | None, system_site_packages: bool,
                   decisions: list[Decision], *, seed_setuptools: bool = False,
                   seed_ensurepip: list[str] | None = None) -> tuple[list[Step], LockedPackage | None]:
    """The pip steps and the torch requirement: the pip tooling, torch's own dependencies, torch
    (its variant matched to the node, recorded in ``decisions``), then every other locked package.
    ``seed_setuptools``: the venv was made --without-pip where ensurepip would have brought
    setuptools; pip-tooling puts that wheel in first (``_needs_ensurepip_setuptools``).
    ``seed_ensurepip``: the venv was made --without-pip and the recipe locks no pip; pip-tooling
    puts in ensurepip's wheels (these projects) first (``_ensurepip_by_uv``)."""
    steps = []
    if tools or seed_ensurepip:
        reqs = [_tool_requirement(t, lock) for t in tools]
        unverified = [r.name for r in reqs if not r.hashes]
        seeded = ", ".join(seed_ensurepip or [])
        steps.append(Step(id="pip-tooling",
                          title=", ".join(r.requirement for r in reqs) or f"{seeded} (the interpreter's ensurepip)",
                          params=P.PipToolingParams(
                              requirements=reqs, unverified=unverified,
                              find_links=[opts.wheelhouse] if opts.wheelhouse else [],
                              installer="uv" if uv_path else "pip", uv=uv_path,
                              no_index=opts.bundle is not None or opts.fleet is not None or opts.no_index,
                              seed_setuptools=seed_setuptools, seed_ensurepip=list(seed_ensurepip or [])),
                          reason="; ".join([t.why for t in tools]
                                           + ([f"first {seeded}: the wheels of the interpreter's ensurepip, "
                                               "which `python -m venv` would have installed, put in by uv"]
                                              if seed_ensurepip else []))
                          + ("; with uv pip install" if uv_path else "")
                          + ("; first the setuptools wheel of the interpreter's ensurepip, as `python -m venv` "
                             "would have installed it, for the builds without isolation" if seed_setuptools else "")))

    torch = torch_requirement(recipe, facts, lock, decisions)
    rest = [p for p in locked_packages(recipe, lock) if p.name.lower() != "torch"]
    if system_site_packages:  # the node's own packages stay visible: say what shadows them
        decisions.extend(downgrades(rest + ([torch] if torch is not None else []), facts))
    if torch is not None:
        # torch's own dependencies first, in a step of their own: a change of the recipe's
        # packages then leaves them (and torch) alone, on a node and in an image's layers
        only_torch = torch_closure(lock)
        deps = [p for p in rest if normalize(p.name) in only_torch]
        rest = [p for p in rest if normalize(p.name) not in only_torch]
        if deps:
            steps.append(_pip_step("pip:torch-deps", f"{len(deps)} packages torch needs", deps, opts, recipe,
                                   lock is not None, "torch's locked dependencies (none of them named by the "
                                   "recipe): installed apart so that they change only with torch", uv_path))
        steps.append(_pip_step("pip:torch", f"torch {torch.version}", [torch], opts, recipe, lock is not None,
                               "torch from the index that carries the variant matched to this node", uv_path))

    if rest:
        steps.append(_pip_step("pip:packages", f"{len(rest)} Python packages (lock order)", rest, opts,
                               recipe, lock is not None,
                               "every locked package at its exact version, hash-checked", uv_path))
    return steps, torch


def _env_file_step(recipe: Recipe, target: Target, env_file: str) -> Step:
    """The environment file: the target's variables and the recipe's, and on a target with a
    scratch disk pip's cache and TMPDIR there."""
    env_vars = {**target.env, **recipe.env}
    if target.cache_dir:
        env_vars.setdefault("PIP_CACHE_DIR", f"{target.cache_dir.rstrip('/')}/.cache/pip")
        env_vars.setdefault("TMPDIR", f"{target.cache_dir.rstrip('/')}/tmp")
    return Step(id="env-file", title="Environment file",
                params=P.EnvFileParams(path=env_file, vars=dict(sorted(env_vars.items()))),
                reason="recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)")


def _pip_from_uv_only(recipe: Recipe, lock: object | None, uv_path: str | None, tools: list[Tool]) -> bool:
    """Whether the venv can be made ``--without-pip``: uv installs the locked pip into it next
    (pip-tooling), so ensurepip's pip would only be replaced (2-3 CPU-s: pip installs itself
    from its wheel and compiles every file). Where ensurepip would also bring the setuptools a
    build needs (``_needs_ensurepip_setuptools``), pip-tooling puts that wheel in with uv from
    Python 3.10, whose ensurepip says where the wheel is; before, the venv keeps ensurepip."""
    if not uv_path or not any(t.name == "pip" for t in tools):
        return False
    return vtuple(recipe.python)[:2] >= (3, 10) or not _needs_ensurepip_setuptools(recipe, lock, tools)


def _ensurepip_by_uv(recipe: Recipe, backend: str, uv_path: str | None, tools: list[Tool]) -> list[str]:
    """What ensurepip installs into a venv on this Python (pip, and setuptools up to 3.11), less
    what pip-tooling installs at its locked version, where uv puts those wheels in instead
    (pip-tooling, ``SEED_ENSUREPIP``): a plain venv (no system site packages: there `python -m
    venv` runs ensurepip before the base's packages are visible, which a fallback to ensurepip
    after it could not match) whose recipe locks no pip, filled by uv, on Python 3.10 to 3.12,
    whose ensurepip says where its wheels are (``_get_packages``; 3.13's has another interface).
    ensurepip itself took 2-3 CPU-s a venv (pip installs itself and compiles every file); []
    elsewhere."""
    if backend != "venv" or recipe.environment.system_site_packages or not uv_path:
        return []
    pinned = {t.name for t in tools}
    version = vtuple(recipe.python)[:2]
    if "pip" in pinned or not (3, 10) <= version < (3, 13):
        return []
    return [name for name in (["pip", "setuptools"] if version < (3, 12) else ["pip"]) if name not in pinned]


def _needs_ensurepip_setuptools(recipe: Recipe, lock: object | None, tools: list[Tool]) -> bool:
    """Whether a venv made ``--without-pip`` lacks what ``python -m venv`` would have given a
    build: up to Python 3.11 ensurepip also installs setuptools, which a build without isolation
    in the environment imports (a source tree, a git dependency, a package with
    ``build_isolation: false``). A recipe that pins setuptools gets its own from pip-tooling."""
    builds_here = bool(recipe.sources or git_dependencies(lock)
                       or any(not p.build_isolation for p in recipe.packages))
    return (builds_here and vtuple(recipe.python)[:2] < (3, 12)
            and not any(t.name == "setuptools" for t in tools))


def git_dependencies(lock: object | None) -> list[GitSource]:
    """The git dependencies of the recipe's source installs that the lock pins (ezpz's
    ambivalent and enrich): built as wheels with --no-deps, their own dependencies being in
    the lock too (``envbuild.lock.srclock``)."""
    out = []
    for pin in getattr(lock, "git", None) or []:
        if pin.required_by and pin.sha:
            out.append(GitSource(name=pin.name, url=pin.url, ref=pin.ref, sha=pin.sha, install="wheel",
                                 why=f"git dependency of {', '.join(pin.required_by)}, pinned by the "
                                     f"lock ({pin.note or pin.ref})"))
    return out


def uv_dest(facts: NodeFacts, prefix: str, uv: UvBinary | None) -> str:
    """Where the pushed uv lives on the node: one copy per binary in the node user's cache
    (``~/.cache/envbuild/uv/<sha256[:16]>/uv``, shared by every environment of the node, so a
    second environment does not push it again), or in the environment when $HOME is not known."""
    if facts.home and uv is not None:
        return f"{facts.home.rstrip('/')}/.cache/envbuild/uv/{uv.sha256[:16]}/uv"
    return f"{prefix.rstrip('/')}/.envbuild/tools/uv"


def _tool_requirement(tool: Tool, lock: object | None) -> P.Requirement:
    """The tool at its locked version with its hash; the bare spec without a lock entry."""
    entry = next((t for t in getattr(lock, "tooling", None) or []
                  if normalize(t.name) == normalize(tool.name)), None)
    if entry is None:
        return P.Requirement(name=tool.name, version=tool.spec.lstrip("="), requirement=tool.requirement)
    hashes = [entry.dist.sha256] if entry.dist and entry.verified else []
    return P.Requirement(name=tool.name, version=entry.version,
                         requirement=f"{tool.name}=={entry.version}", hashes=hashes)


def _smoke_step(recipe: Recipe, prefix: str, env_file: str, steps: list[Step], facts: NodeFacts,
                opts: PlanOptions, torch: str | None) -> Step:
    """The smoke runs, decided here: envbuild's scripts (on the node's GPUs unless ``torch``,
    the plan's torch variant, is a CPU build) and the recipe's native benchmark when the node
    can run it."""
    kinds = ["gpt", "collective"] + (["apex"] if recipe.apex else [])
    bench = recipe.benchmark.model_dump(mode="json") if recipe.benchmark else None
    sources = {s.params.name: s.params.dest for s in steps if s.kind == "git_source"}
    gpus = len(facts.gpus)
    runs = node_runs(prefix, {"kinds": kinds, "preset": opts.smoke_preset}, bench, gpus=gpus,
                     sources=sources, output=recipe.output_of(None), torch=torch)
    native = native_run(bench, gpus=gpus, sources=sources, cwd=smoke_dir(prefix), output=recipe.output_of(None))
    return Step(id="smoke", title="Smoke benchmark", reason="prove the environment trains",
                params=P.SmokeParams(kinds=kinds, preset=opts.smoke_preset, dir=smoke_dir(prefix),
                                     env_file=env_file, runs=[P.SmokeRun(**r) for r in runs],
                                     native_skip=native.get("skip")))


def _conda_params(recipe: Recipe, opts: PlanOptions) -> dict:
    """conda specs and where Python comes from: from the channel when a spec names python
    (the default: ``python=<recipe python>``), else from the node (a venv over the prefix)."""
    specs = list(opts.conda_packages) or [f"python={recipe.python}"]
    named = [s.split()[0].split("=")[0].split("<")[0].split(">")[0].split("[")[0] for s in specs]
    return {"conda_specs": specs,
            "python_from": "conda" if any(n.lower() == "python" for n in named) else "node"}


def _env_reason(recipe: Recipe, backend: str, have_interp: bool, params: dict | None = None) -> str:
    parts = [f"recipe asks for Python {recipe.python}"]
    if backend == "conda" and params:
        parts.append(f"conda packages {' '.join(params['conda_specs'])}")
        if params["python_from"] == "node":
            parts.append("no python among the conda specs: a venv of the node's Python is laid "
                         "over the conda prefix and takes the pip packages")
    if backend == "container":
        parts.append(f"inside the image {recipe.environment.base_image}: a venv with "
                     "--system-site-packages over the image's python3 keeps its preinstalled "
                     "packages and takes the plan's")
    elif recipe.environment.system_site_packages:
        parts.append("--system-site-packages on top of the module's packages (published setup)")
    node_python = backend == "venv" or bool(params and params.get("python_from") == "node")
    if node_python and not have_interp:
        parts.append("no matching interpreter in the node facts: the executor must find one")
    return "; ".join(parts)


def _pip_step(step_id: str, title: str, pkgs: list[LockedPackage], opts: PlanOptions,
              recipe: Recipe, locked: bool, reason: str, uv_path: str | None = None) -> Step:
    find_links = [opts.wheelhouse] if opts.wheelhouse else []
    for p in pkgs:
        if p.find_links and p.find_links not in find_links and opts.fleet is None and not opts.no_index:
            find_links.append(p.find_links)
    index_url = next((p.index_url for p in pkgs if p.index_url), None)
    # Locked from the wheelhouse and a wheelhouse given: install from it alone (air-gapped
    # nodes; no round trips to an index the node may not reach).
    no_index = bool(opts.wheelhouse) and (all(p.from_wheelhouse for p in pkgs) or opts.bundle is not None
                                          or opts.fleet is not None or opts.no_index)
    if no_index:
        index_url = None
        reason += f"; from the wheelhouse {opts.wheelhouse} only (--no-index)"
    env: dict[str, str] = {}
    for p in pkgs:
        env.update(p.env)
    unverified = [p.name for p in pkgs if not p.hashes]
    if unverified:
        reason += f"; without a hash in the lock: {', '.join(unverified)}"
    no_iso = [p.name for p in pkgs
              if (d := recipe.package(p.name)) is not None and not d.build_isolation]
    installer, note = step_installer("uv" if uv_path else "pip", no_build_isolation=no_iso, env=env)
    if note:
        reason += f"; {note}"
    return Step(id=step_id, title=title, reason=reason, params=P.PipInstallParams(
        requirements=[p.as_requirement() for p in pkgs], find_links=find_links,
        index_url=index_url, no_index=no_index, env=env, no_deps=locked,
        no_build_isolation=no_iso, unverified=unverified, installer=installer,
        uv=uv_path if installer == "uv" else None))


def torch_cuda(recipe: Recipe, facts: NodeFacts, torch: LockedPackage | None) -> str | None:
    """torch's CUDA on this node ("11.1"; None: a CPU build or not known), read as preflight
    reads it: the local tag of the wheel the plan installs ("+cu111"), else the variant
    ``envbuild.compat.context.pick_torch`` takes for the recipe's torch on these facts (the
    PyPI build of 2.11.0 is its cu130 variant; a preinstalled torch is the recipe's version).
    One reading, so that `check` and the plan's Apex decision never disagree (issue 49)."""
    if torch is not None and torch.local_tag:
        return cuda_of_tag(torch.local_tag)
    from envbuild.compat.context import pick_torch

    pick = pick_torch(recipe, facts)
    return pick.cuda if pick is not None else None


def _source_steps(recipe: Recipe, src: GitSource, prefix: str, facts: NodeFacts,
                  torch: LockedPackage | None, pip_version: str, lock: object | None,
                  opts: PlanOptions, decisions: list[Decision]) -> list[Step]:
    cuda = torch_cuda(recipe, facts, torch)
    dest = f"{prefix}/src/{src.name}"
    out = [Step(id=f"git:{src.name}", title=f"{src.name} @ {(src.sha or src.ref)[:12]}",
                params=P.GitSourceParams(name=src.name, url=src.url,
                                         fetch_url=(opts.fetch_commits.get(f"{src.url}@{src.sha}")
                                                    or opts.fetch_urls.get(src.url, src.url)),
                                         ref=src.ref, sha=src.sha, dest=dest, without=list(src.without),
                                         **_submodules(src, opts)),
                reason=src.why)]
    for patch in (p for p in recipe.patches if p.component == src.name):
        decision = None
        reason = patch.why
        if patch.kind == "apex-cuda-check":
            from envbuild.patches.apex import decide

            d = decide(facts.nvcc, cuda, cuda_ext="--cuda_ext" in _apex_options(recipe))
            decisions.append(Decision(subject=f"patch:{patch.id}", outcome=d.outcome, reason=d.reason))
            decision = d.outcome
            reason = f"{d.outcome}: {d.reason}"
            if d.outcome in ("unchanged", "cpu-only"):
                continue
        old, new = _filled(patch, facts, opts, decisions)
        params = P.PatchParams(id=patch.id, component=src.name, dest=dest, patch_kind=patch.kind,
                               file=patch.file, old=old, new=new, count=patch.count,
                               why=patch.why, decision=decision, nvcc=facts.nvcc,
                               torch_cuda=cuda)
        out.append(Step(id=f"patch:{patch.id}", title=f"patch {patch.id}", params=params,
                        reason=reason))
    from envbuild.plan.data import data_step  # the recipe's downloads into this tree (sha256-checked)

    bundled = ({f.name[len("data/"):]: f.sha256 for f in opts.bundle.files if f.name.startswith("data/")}
               if opts.bundle is not None else None)
    if (data := data_step(recipe, src, dest, prefix, opts.data_mirror, bundled)) is not None:
        out.append(data)
    if src.build:
        key = (_tree_key(src, dest, out, facts, torch, cuda, recipe.python) if src.build_outputs else None)
        out.append(Step(id=f"build:{src.name}", title=f"build {src.name}",
                        params=P.BuildParams(name=src.name, dest=dest, commands=list(src.build),
                                             env=dict(src.env), provides=list(src.build_provides),
                                             outputs=list(src.build_outputs), cache_key=key),
                        reason=f"published build step for {src.name}"
                               + (f"; its outputs ({', '.join(src.build_outputs)}) are built once per "
                                  f"key {key} and restored from the build cache on the next node"
                                  if key else "")))
    if src.install == "apex":
        patch_params = [s.params.model_dump(mode="json") for s in out if s.kind == "patch"]
        out.append(_apex_step(src, prefix, dest, facts, torch, pip_version, lock, decisions,
                              patch_digest=_digest(patch_params) if patch_params else "",
                              python=recipe.python))
    elif src.install != "none":
        out.append(Step(id=f"install:{src.name}", title=f"install {src.name} ({src.install})",
                        params=P.InstallSourceParams(name=src.name, dest=dest, mode=src.install),
                        reason=_install_reason(src)))
    return out


def _submodules(src: GitSource, opts: PlanOptions) -> dict:
    """Apex: the submodules its build options read (--fast_multihead_attn: cutlass), fetched
    with the checkout, from the git mirror's copy when there is one."""
    if src.install != "apex":
        return {}

    subs = submodules_for(list(src.build_options))
    return {"submodules": [path for path, _ in subs],
            "submodule_mirrors": {url: opts.fetch_urls[url] for _, url in subs if url in opts.fetch_urls}}


def _filled(patch, facts: NodeFacts, opts: PlanOptions, decisions: list[Decision]):
    """The patch's old/new with {facts.*}/{inventory.*} filled (envbuild.plan.placeholders);
    InputError naming the patch and the placeholder when one cannot be."""
    names = placeholders(patch.old) + placeholders(patch.new)
    if not names:
        return patch.old, patch.new
    inventory = opts.inventory if opts.inventory is not None else inventory_values([facts])
    old, new = fill_patch(patch, facts, inventory)
    decisions.append(Decision(subject=f"patch:{patch.id}", outcome="filled",
                              reason=f"{', '.join(sorted(set(names)))} from the facts of "
                                     f"{inventory.nodes} node(s): {new if new != patch.new else old}"))
    return old, new


def _install_reason(src: GitSource) -> str:
    return {
        "editable": "editable install: the tree stays writable (JIT kernels build into it)",
        "wheel": "non-editable install, as the published instructions require",
        "pth": "no setup.py at this commit: a .pth entry puts the tree on sys.path",
    }.get(src.install, src.install)


def _apex_options(recipe: Recipe) -> list[str]:
    return list(recipe.apex.build_options) if recipe.apex else []


def _apex_step(src: GitSource, prefix: str, dest: str, facts: NodeFacts, torch: LockedPackage | None,
               pip_version: str, lock: object | None, decisions: list[Decision], *,
               patch_digest: str = "", python: str | None = None) -> Step:
    """Build Apex once into a wheel cache keyed by everything that changes the binary:
    the commit, the patches applied to it, torch and its CUDA, nvcc, archs, options, Python.
    The key names the torch wheel the plan installs (version and local tag; neither for a
    preinstalled torch), as it always has: a key is an identifier, and changing its inputs
    would rebuild every cached wheel."""
    torch_cuda = cuda_of_tag(torch.local_tag) if torch is not None else None
    pin = lock.git_pin(src.name) if lock is not None and hasattr(lock, "git_pin") else None
    known, _ = apex_commit(src)
    apex_date = (pin.commit_date if pin and pin.commit_date else None) or (known.date if known else None)
    cuda_ext = "--cuda_ext" in src.build_options
    archs = apex_build.arch_list(facts.archs) if facts.archs else None
    parallel_row = option_row("--parallel")
    parallel_ext = bool(apex_date and parallel_row and apex_date >= parallel_row.added)
    jobs = apex_build.build_jobs(facts.cpu_cores or 1, facts.memory_gib or 4.0, cuda_ext,
                                 nvcc=facts.nvcc, archs=max(1, len(facts.archs)),
                                 parallel_ext=parallel_ext)
    options = list(src.build_options)
    if jobs.parallel > 1:
        options += ["--parallel", str(jobs.parallel)]
    key = apex_build.cache_key(src.sha or src.ref, patch_digest, torch.version if torch else None,
                               torch_cuda, facts.nvcc, archs or "", list(src.build_options),
                               python=python)
    wheel_dir = f"{prefix}/.envbuild/wheels/{key}"
    cmd = apex_build.install_command(pip_version=pip_version, options=options,
                                     apex_date=apex_date, src=".", wheel_dir=wheel_dir,
                                     python=f"{prefix}/bin/python")
    env = {**cmd.env, **jobs.env(), **src.env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if archs:
        env["TORCH_CUDA_ARCH_LIST"] = archs
    decisions.append(Decision(subject="apex-build-jobs",
                              outcome=f"parallel={jobs.parallel} MAX_JOBS={jobs.max_jobs} "
                                      f"nvcc-threads={jobs.nvcc_threads}",
                              reason=jobs.reason, source="https://github.com/NVIDIA/apex/issues/1882"))
    decisions.append(Decision(subject="apex-options", outcome=" ".join(cmd.argv), reason=cmd.reason))
    if archs:
        decisions.append(Decision(subject="torch-cuda-arch-list", outcome=archs,
                                  reason="from the node's GPUs, so the build needs no visible GPU"))
    return Step(id=f"apex:{src.name}", title=f"build Apex wheel ({src.name})",
                params=P.ApexBuildParams(dest=dest, argv=list(cmd.argv), wheel_argv=list(cmd.argv),
                                         env=env, cache_key=key, wheel_dir=wheel_dir,
                                         options=list(src.build_options)),
                reason=f"{cmd.reason}; {jobs.reason}")


def _tree_key(src: GitSource, dest: str, steps: list[Step], facts: NodeFacts, torch: LockedPackage | None,
              cuda: str | None, python: str | None) -> str:
    """The build cache key of a source's in-tree build outputs: everything the outputs depend on,
    the tree's absolute path included (a build tool such as ninja records its command lines,
    which name it), and the archive's format. The source's patch steps so far are its patches."""
    patches = [s.params.model_dump(mode="json") for s in steps if s.kind == "patch"]
    payload = {"sha": src.sha or src.ref, "patches": _digest(patches) if patches else "",
               "commands": list(src.build), "env": dict(src.env), "outputs": list(src.build_outputs),
               "dest": dest, "torch": f"{torch.version}+{torch.local_tag or ''}" if torch else None,
               "torch_cuda": cuda, "nvcc": facts.nvcc, "archs": sorted(facts.archs), "python": python or "",
               "archive": treecache.ARCHIVE_FORMAT}
    return f"tree-{src.name}-{(src.sha or 'unpinned')[:12]}-{_digest(payload)[:20]}"


def _digest(obj: object) -> str:
    """sha256 over an object's canonical JSON."""
    return sha256_text(canonical_json(obj))


def _lock_digest(lock: object | None) -> str | None:
    """The lock's identifier (``envbuild.lock.serialize.lock_digest``); None without a lock."""
    if lock is None or not hasattr(lock, "model_dump"):
        return None
    return lock_digest(lock)
