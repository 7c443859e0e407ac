"""Build the plan for one node: a pure function of (recipe, target, facts, lock, options).

The order is the order a careful person would follow on the node:

    preflight -> system packages -> environment -> pip tooling -> torch -> locked PyPI
    packages -> for each git source: clone at SHA, patches, build, install (Apex: wheel build)
    -> environment file -> import check -> smoke

Every decision taken from facts (torch CUDA variant, Apex check, build parallelism, option
syntax) is recorded as a ``Decision`` with its reason, and repeated in the step's ``reason``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import InputError
from envbuild.facts.model import NodeFacts
from envbuild.plan.model import Decision, Plan, Step
from envbuild.plan.packages import (LockedPackage, locked_packages, pip_release, requirement,
                                     torch_requirement)
from envbuild.recipes.schema import GitSource, Recipe
from envbuild.targets.schema import Target


# setuptools before 70.1 has no bdist_wheel of its own (the `wheel` package provides it, up to
# 0.45; 0.46 dropped it). Without build isolation the env's own setuptools builds every
# editable/wheel/Apex install, and a venv of Python <= 3.11 starts with setuptools 65.
WHEEL_TOOL = "wheel<0.46"
WHEEL_WHY = ("setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and editable "
             "installs; without it pip fails with \"invalid command 'bdist_wheel'\"")


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
    verdict: dict = field(default_factory=dict)  # preflight summary, when known
    conda_channel: str | None = None  # conda backend: channel URL or local folder (None: conda-forge)
    conda_packages: tuple[str, ...] = ()  # conda backend: specs; none -> python=<recipe python>


def verdict_summary(verdict: object) -> dict:
    """The part of a preflight verdict a plan carries: feasible, error and warning rule ids."""
    violations = getattr(verdict, "violations", [])
    return {"feasible": bool(getattr(verdict, "feasible", False)),
            "errors": [v.rule for v in violations if v.severity == "error"],
            "warnings": [v.rule for v in violations if v.severity == "warning"]}


def default_prefix(recipe: Recipe, target: Target) -> str:
    """``<cache_dir>/envbuild/envs/<recipe>`` on targets with a scratch disk, else under ~."""
    base = f"{target.cache_dir.rstrip('/')}/envbuild" if target.cache_dir else "~/.envbuild"
    return f"{base}/envs/{recipe.name}"


def build_plan(recipe: Recipe, target: Target, facts: NodeFacts, lock: object | None = None,
               options: PlanOptions | None = None) -> Plan:
    """The ordered steps for one node. Pure: reads nothing, runs nothing."""
    opts = options or PlanOptions()
    prefix = opts.prefix or default_prefix(recipe, target)
    backend = opts.backend or recipe.environment.kind
    if backend not in ("venv", "conda", "container", "module-venv"):
        raise InputError(f"unknown backend {backend!r}", hint="use --backend venv or --backend conda")
    decisions: list[Decision] = []
    steps: list[Step] = []
    add = steps.append

    add(Step(id="preflight", kind="preflight", title="Preflight compatibility check",
             params={"verdict": opts.verdict}, reason="refuse an infeasible node before installing"))
    if recipe.system_packages:
        add(Step(id="system-packages", kind="system_packages", title="System packages",
                 params={"manager": "apt", "packages": list(recipe.system_packages)},
                 reason="native prerequisites named by the published instructions"))

    interp = facts.python(recipe.python)
    env_params = {"kind": backend, "prefix": prefix, "python": recipe.python,
                  "python_path": interp.path if interp else None,
                  "system_site_packages": recipe.environment.system_site_packages,
                  "conda_module": recipe.environment.conda_module,
                  "base_image": recipe.environment.base_image,
                  "conda_channel": opts.conda_channel if backend == "conda" else None}
    if backend == "conda":
        env_params.update(_conda_params(recipe, opts))
    add(Step(id="environment", kind="environment",
             title=f"{backend} environment, Python {recipe.python}",
             params=env_params, reason=_env_reason(recipe, backend, interp is not None, env_params)))

    pip_version, pip_reason = pip_release(recipe.environment.pip)
    tooling = []
    if recipe.environment.pip or recipe.apex:  # the pip version decides Apex's option syntax
        tooling.append(f"pip=={pip_version}")
    if recipe.environment.setuptools:
        tooling.append(requirement("setuptools", recipe.environment.setuptools))
    built = [s.name for s in recipe.sources if s.install in ("editable", "wheel", "apex")]
    if built:
        tooling.append(WHEEL_TOOL)
    if tooling:
        why = [pip_reason] if recipe.environment.pip or recipe.apex else []
        if recipe.environment.setuptools:
            why.append("setuptools pinned by the recipe")
        if built:
            why.append(f"{', '.join(built)} built with --no-build-isolation: {WHEEL_WHY}")
        add(Step(id="pip-tooling", kind="pip_tooling", title=", ".join(tooling),
                 params={"requirements": tooling}, reason="; ".join(why)))

    torch = torch_requirement(recipe, facts, lock, decisions)
    if torch is not None:
        add(_pip_step("pip:torch", f"torch {torch.version}", [torch], opts,
                      "torch from the index that carries the variant matched to this node"))

    rest = [p for p in locked_packages(recipe, lock) if p.name.lower() != "torch"]
    if rest:
        add(_pip_step("pip:packages", f"{len(rest)} Python packages (lock order)", rest, opts,
                      "every locked package at its exact version, hashes where known"))

    torch_cuda = _torch_cuda(torch)
    for src in recipe.sources:
        steps.extend(_source_steps(recipe, src, prefix, facts, torch, pip_version, lock, opts,
                                   decisions))

    env_vars = {**target.env, **recipe.env}
    if target.cache_dir:
        env_vars.setdefault("PIP_CACHE_DIR", f"{target.cache_dir.rstrip('/')}/.cache/pip")
        env_vars.setdefault("TMPDIR", f"{target.cache_dir.rstrip('/')}/tmp")
    add(Step(id="env-file", kind="env_file", title="Environment file",
             params={"path": f"{prefix}/.envbuild/env.sh", "vars": dict(sorted(env_vars.items()))},
             reason="recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)"))
    if recipe.import_check:
        add(Step(id="import-check", kind="import_check", title="Import check",
                 params={"modules": list(recipe.import_check)},
                 reason="fail now, not at the first training step"))
    if opts.smoke:
        kinds = ["gpt", "collective"] + (["apex"] if recipe.apex else [])
        add(Step(id="smoke", kind="smoke", title="Smoke benchmark",
                 params={"kinds": kinds, "preset": opts.smoke_preset},
                 reason="prove the environment trains"))

    return Plan(recipe=recipe.name, target=target.name, host=opts.host, prefix=prefix,
                backend=backend, lock_digest=_lock_digest(lock), facts_origin=facts.origin,
                decisions=decisions, steps=steps)


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
    if recipe.environment.system_site_packages:
        parts.append("--system-site-packages on top of the module's packages (published setup)")
    node_python = backend == "venv" or bool(params and params.get("python_from") == "node")
    if node_python and not have_interp:
        parts.append("no matching interpreter in the node facts: the executor must find one")
    return "; ".join(parts)


def _pip_step(step_id: str, title: str, pkgs: list[LockedPackage], opts: PlanOptions,
              reason: str) -> Step:
    find_links = [opts.wheelhouse] if opts.wheelhouse else []
    for p in pkgs:
        if p.find_links and p.find_links not in find_links:
            find_links.append(p.find_links)
    index_url = next((p.index_url for p in pkgs if p.index_url), None)
    # Locked from the wheelhouse and a wheelhouse given: install from it alone (air-gapped
    # nodes; no round trips to an index the node may not reach).
    no_index = bool(opts.wheelhouse) and all(p.from_wheelhouse for p in pkgs)
    if no_index:
        index_url = None
        reason += f"; from the wheelhouse {opts.wheelhouse} only (--no-index)"
    env: dict[str, str] = {}
    for p in pkgs:
        env.update(p.env)
    return Step(id=step_id, kind="pip_install", title=title, reason=reason, params={
        "requirements": [p.as_param() for p in pkgs],
        "find_links": find_links,
        "index_url": index_url,
        "no_index": no_index,
        "env": env,
        "require_hashes": all(p.hashes for p in pkgs),
    })


def _torch_cuda(torch: LockedPackage | None) -> str | None:
    """"cu111" -> "11.1"; cpu or unknown -> None."""
    if torch is None or not torch.local_tag or not torch.local_tag.startswith("cu"):
        return None
    digits = torch.local_tag[2:]
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else None


def _source_steps(recipe: Recipe, src: GitSource, prefix: str, facts: NodeFacts,
                  torch: LockedPackage | None, pip_version: str, lock: object | None,
                  opts: PlanOptions, decisions: list[Decision]) -> list[Step]:
    torch_cuda = _torch_cuda(torch)
    dest = f"{prefix}/src/{src.name}"
    fetch_url = _fetch_url(src.url, opts.git_mirror)
    out = [Step(id=f"git:{src.name}", kind="git_source", title=f"{src.name} @ {(src.sha or src.ref)[:12]}",
                params={"name": src.name, "url": src.url, "fetch_url": fetch_url, "ref": src.ref,
                        "sha": src.sha, "dest": dest},
                reason=src.why)]
    for patch in (p for p in recipe.patches if p.component == src.name):
        params = {"id": patch.id, "component": src.name, "dest": dest, "kind": patch.kind,
                  "file": patch.file, "old": patch.old, "new": patch.new, "count": patch.count,
                  "why": patch.why, "decision": None, "nvcc": facts.nvcc, "torch_cuda": torch_cuda}
        reason = patch.why
        if patch.kind == "apex-cuda-check":
            from envbuild.patches.apex import decide

            d = decide(facts.nvcc, torch_cuda, cuda_ext="--cuda_ext" in _apex_options(recipe))
            decisions.append(Decision(subject=f"patch:{patch.id}", outcome=d.outcome, reason=d.reason))
            params["decision"] = d.outcome
            reason = f"{d.outcome}: {d.reason}"
            if d.outcome in ("unchanged", "cpu-only"):
                continue
        out.append(Step(id=f"patch:{patch.id}", kind="patch", title=f"patch {patch.id}",
                        params=params, reason=reason))
    if src.build:
        out.append(Step(id=f"build:{src.name}", kind="build", title=f"build {src.name}",
                        params={"name": src.name, "dest": dest, "commands": list(src.build),
                                "env": dict(src.env)},
                        reason=f"published build step for {src.name}"))
    if src.install == "apex":
        patch_params = [s.params for s in out if s.kind == "patch"]
        out.append(_apex_step(src, dest, facts, torch, pip_version, lock, decisions,
                              patch_digest=_digest(patch_params) if patch_params else "",
                              python=recipe.python))
    elif src.install != "none":
        out.append(Step(id=f"install:{src.name}", kind="install_source",
                        title=f"install {src.name} ({src.install})",
                        params={"name": src.name, "dest": dest, "mode": src.install},
                        reason=_install_reason(src)))
    return out


def _install_reason(src: GitSource) -> str:
    return {
        "editable": "editable install: the tree stays writable (JIT kernels build into it)",
        "wheel": "non-editable install, as the published instructions require",
        "pth": "no setup.py at this commit: a .pth entry puts the tree on sys.path",
    }.get(src.install, src.install)


def _apex_options(recipe: Recipe) -> list[str]:
    return list(recipe.apex.build_options) if recipe.apex else []


def _apex_step(src: GitSource, dest: str, facts: NodeFacts, torch: LockedPackage | None,
               pip_version: str, lock: object | None, decisions: list[Decision], *,
               patch_digest: str = "", python: str | None = None) -> Step:
    """Build Apex once into a wheel cache keyed by everything that changes the binary:
    the commit, the patches applied to it, torch and its CUDA, nvcc, archs, options, Python."""
    from envbuild.compat.commits import apex_commit
    from envbuild.patches import apex_build
    from envbuild.patches.apex_options import option_row

    torch_cuda = _torch_cuda(torch)
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
    wheel_dir = f"{dest}/.envbuild-wheel"
    cmd = apex_build.install_command(pip_version=pip_version, options=options,
                                     apex_date=apex_date, src=".", wheel_dir=wheel_dir)
    env = {**cmd.env, **jobs.env(), **src.env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if archs:
        env["TORCH_CUDA_ARCH_LIST"] = archs
    key = apex_build.cache_key(src.sha or src.ref, "", torch.version if torch else None, torch_cuda,
                               facts.nvcc, archs or "", list(src.build_options), python=python)
    decisions.append(Decision(subject="apex-build-jobs",
                              outcome=f"parallel={jobs.parallel} MAX_JOBS={jobs.max_jobs} "
                                      f"nvcc-threads={jobs.nvcc_threads}",
                              reason=jobs.reason, source="https://github.com/NVIDIA/apex/issues/1882"))
    decisions.append(Decision(subject="apex-options", outcome=" ".join(cmd.argv), reason=cmd.reason))
    if archs:
        decisions.append(Decision(subject="torch-cuda-arch-list", outcome=archs,
                                  reason="from the node's GPUs, so the build needs no visible GPU"))
    return Step(id=f"apex:{src.name}", kind="apex_build", title=f"build Apex wheel ({src.name})",
                params={"dest": dest, "argv": list(cmd.argv), "env": env, "cache_key": key,
                        "cache_dir": "~/.envbuild/cache/wheels", "wheel_dir": wheel_dir,
                        "options": list(src.build_options)},
                reason=f"{cmd.reason}; {jobs.reason}")


def _fetch_url(url: str, mirror: str | None) -> str:
    """Where to clone from: the mirror copy of a GitHub URL when a mirror is given."""
    if not mirror:
        return url
    try:
        from envbuild.gitsrc import mirror_path

        found = mirror_path(url, Path(mirror))
        return str(found) if found else url
    except ImportError:  # pragma: no cover - gitsrc ships with the lock package
        return url


def _digest(obj: object) -> str:
    """sha256 over an object's canonical JSON."""
    import hashlib

    from envbuild.fsio import canonical_json

    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def _lock_digest(lock: object | None) -> str | None:
    """sha256 over the lock's canonical JSON (None without a lock)."""
    if lock is None or not hasattr(lock, "model_dump"):
        return None
    import hashlib

    from envbuild.fsio import canonical_json

    return hashlib.sha256(canonical_json(lock.model_dump(by_alias=True)).encode()).hexdigest()
