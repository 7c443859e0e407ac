"""The CPU import proof of a recipe (tests/testbed/test_import_proof.py): its Python environment built
by the real executor from its lock, then every module its entry scripts import, imported.

``proof_plan`` is the recipe's own plan for a CPU node (the lock's torch stand-in for a ``+cpu``
pin, ``envbuild.lock.packages.cpu_stand_in``), cut to the steps that make the Python
environment: venv, pip tooling, locked packages, git checkouts, their CPU builds and installs.
Every step left out is named with the reason (``Unexercised``) and so is every source whose
commit the git mirror lacks. ``import_modules`` runs the environment's python once over the
module list from the recipe's import fact (``envbuild.scriptimports``) and returns, per
module, ``ok`` or the exception, with the missing module's name for a ModuleNotFoundError.

What the lock does not install from a reachable source is replaced by its ``stand_in``
(``envbuild.lock.standins``), read from the lock, never chosen here (``stand_ins``): a
preinstalled package (an image's, a module's, a node venv's) goes into a stand-in of that base
environment (``build_base``): a copy of the recipe's Python holding them in its own
site-packages for an image or a module, a venv of it for a node's venv. The plan's environment
is made over it as the real plan does (``--system-site-packages``; over a venv, the base's site
folder put on the path by the plan's .pth); a package pinned on an unreachable index is installed by
its own plan step at the stand-in's version from PyPI (no hash: hash-checked when the lock records its wheel).
A package with no public stand-in (NVIDIA's Apex, Transformer Engine) is named as not exercised.

A source's build steps are left out, named, where this node cannot run them: those that read
the recipe's data (the planner puts a tree's build commands after its data step, and the proof
fetches no data), and those the recipe says need its base image (``build_needs_image``: the
stand-in holds only the image's Python packages); the modules such a build makes
(``build_provides``) are then named where an import needs them. A git mirror's snapshot that
lacks some files of a pinned commit (``tree_gaps``: large files left out of the snapshot) is
checked out without them (``check_out_without``, a sparse checkout the plan's git step then
keeps) when none of them can be code, each named; else the source is left out.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.facts.profile import from_target
from envbuild.facts.uvbin import controller_uv, find_uv
from envbuild.gitsrc import mirror_path
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.lock.schema import normalize
from envbuild.plan.model import Decision, Plan
from envbuild.plan.params import (ApexBuildParams, BuildParams, DataParams, EnvironmentParams, GitSourceParams,
                                  InstallSourceParams, PatchParams, PipInstallParams, PipToolingParams,
                                  PreflightParams, SystemPackagesParams, UvToolParams)
from envbuild.plan.placeholders import placeholders
from envbuild.plan.resolve import fetch_urls
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target

# the steps that make the Python environment, by the type of their params
KEPT = (EnvironmentParams, UvToolParams, PipToolingParams, PipInstallParams, GitSourceParams, InstallSourceParams,
        BuildParams)
WHY_LEFT_OUT: dict[type, str] = {
    ApexBuildParams: "Apex's C++/CUDA extensions ({options}) need nvcc and a CUDA torch",
    PatchParams: "patch {id}: applies to a tree this proof does not build ({why})",
    DataParams: "the recipe's data downloads (not needed to import)",
    SystemPackagesParams: "system packages (apt) of the node",
    PreflightParams: "the preflight verdict (no GPU here)",
}


@dataclass(frozen=True)
class Unexercised:
    what: str
    why: str


@dataclass
class ProofPlan:
    """The plan a proof runs, and what it leaves out."""

    plan: Plan
    left: list[Unexercised]
    unbuilt: dict[str, str] = field(default_factory=dict)  # module -> the left-out build that makes it
    sparse: dict[str, list[str]] = field(default_factory=dict)  # source -> files checked out without


# what a file absent from a mirror's snapshot may be for its tree to be checked out without it:
# documents, images, videos (read by no import and no build); anything else may be code or data
# that code reads, and the source is left out instead
NOT_CODE = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".mp4", ".mov",
                      ".pptx", ".docx", ".xlsx"})


def may_be_code(path: str) -> bool:
    """Whether a file of a tree may be read by an import or a build (see ``NOT_CODE``)."""
    return Path(path).suffix.lower() not in NOT_CODE


@dataclass
class StandIns:
    """The lock's stand-ins, sorted by where the proof puts them."""

    base: list[str] = field(default_factory=list)  # requirements of the base stand-in
    in_plan: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # name -> (version, hashes)
    decisions: list[Decision] = field(default_factory=list)  # each replacement, for the report
    left: list[Unexercised] = field(default_factory=list)  # no public stand-in
    absent: set[str] = field(default_factory=set)  # normalized names of those


def stand_ins(lock) -> StandIns:
    """Where each package the lock does not install from a reachable source stands in from."""
    out = StandIns()
    for entry in lock.packages:
        preinstalled = entry.source == "preinstalled"
        if entry.stand_in is None:
            continue
        given = f"{entry.name} {entry.version}" + (f" from {entry.provided_by}" if preinstalled else
                                                   "" if entry.verified else f" from {entry.source}")
        if entry.stand_in.version is None:
            out.left.append(Unexercised(entry.name, f"{given}: no public stand-in ({entry.stand_in.why})"))
            out.absent.add(normalize(entry.name))
            continue
        if entry.verified and not preinstalled:  # installed as locked: nothing to stand in for
            continue
        if preinstalled:
            out.base.append(f"{entry.name}=={entry.stand_in.version}")
        else:
            dist = entry.stand_in.dist
            out.in_plan[normalize(entry.name)] = (entry.stand_in.version, [dist.sha256] if dist else [])
        out.decisions.append(Decision(
            subject=f"{entry.name}-stand-in",
            outcome=f"{entry.name} {entry.stand_in.version} from PyPI",
            reason=f"stands in for {given}: {entry.stand_in.why} ({entry.stand_in.source})"))
    # torch first: a package that builds against it (DeepSpeed's sdist) finds it installed
    out.base.sort(key=lambda r: normalize(r.split("==")[0]) not in ("torch", "torchvision"))
    return out


def base_is_a_venv(recipe: Recipe) -> bool:
    """Whether the recipe's base environment is a venv (a node's own, as h100-megatron-deepspeed
    builds on) rather than an interpreter installation (an image's or a module's python)."""
    return not (recipe.environment.base_image or recipe.environment.conda_module)


BASE_FORMAT = 2  # bump when build_base makes a different base from the same inputs


def base_cache_root() -> Path:
    root = os.environ.get("ENVBUILD_CACHE_DIR") or Path.home() / ".cache" / "envbuild"
    return Path(root) / "proof-bases"


def cached_base(python: str, requirements: list[str], as_venv: bool) -> tuple[str, bool]:
    """The base stand-in for (``python``, ``requirements``, ``as_venv``), built once per
    machine under ``base_cache_root()/<key>`` and reused by every later proof (returns its
    python and whether this call built it). The key hashes the interpreter's path and version,
    the requirements and ``BASE_FORMAT``; a folder without its completion marker (a build that
    was interrupted) is built again. Proofs only read it: their environment is made over it
    (``--system-site-packages``), so what they install lands in their own prefix."""
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], check=True,
                             capture_output=True, text=True).stdout.strip()
    key = hashlib.sha256(json.dumps([str(Path(python).resolve()), version, sorted(requirements),
                                     as_venv, BASE_FORMAT]).encode()).hexdigest()[:20]
    root = base_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    prefix, done = root / key, root / key / ".envbuild-base"
    with open(root / f"{key}.lock", "w") as lockfile:
        fcntl.flock(lockfile, fcntl.LOCK_EX)  # two workers wanting one base build it once
        if done.is_file():
            return done.read_text().strip(), False
        shutil.rmtree(prefix, ignore_errors=True)
        base = build_base(python, prefix, requirements, as_venv)
        done.write_text(base + "\n")
        return base, True


def build_base(python: str, prefix: Path, requirements: list[str], as_venv: bool) -> str:
    """The base environment's stand-in, holding ``requirements`` from PyPI (torch and
    torchvision first, then the rest built against them without isolation); returns its python.
    Installed by the controller's uv (envbuild's own dependency) into that python: pip took 60 s
    for Polaris's base on a cold cache, compiling every module of torch.

    ``as_venv``: a venv of ``python`` (a node's venv); otherwise a copy of ``python``'s
    installation with the packages in its own site-packages, the shape of an image's or a
    module's python. The copy leaves out files of site-packages that no installed distribution
    owns (on this machine a .pth the sandbox injects, which appends its proxy CA to any certifi
    and so changes files the plan installs); nothing of the original is changed."""
    if as_venv:
        subprocess.run([python, "-m", "venv", str(prefix)], check=True)
        base = str(prefix / "bin" / "python")
    else:
        base = _copy_interpreter(Path(python), prefix)
    uv = find_uv()
    if uv is None:
        raise RuntimeError("no uv here: envbuild's dependency `uv` is not installed")
    install = [uv, "pip", "install", "--python", base, "--no-progress"]
    first = [r for r in requirements if normalize(r.split("==")[0]) in ("torch", "torchvision")]
    rest = [r for r in requirements if r not in first]
    env = {**os.environ, "DS_BUILD_OPS": "0"}  # DeepSpeed's sdist: no C++/CUDA ops at install
    if first:
        subprocess.run([*install, *first], check=True, env=env)
    if rest:
        subprocess.run([*install, "setuptools", "wheel"], check=True, env=env)
        subprocess.run([*install, "--no-build-isolation", *rest], check=True, env=env)
    return base


def _copy_interpreter(python: Path, prefix: Path) -> str:
    """A copy of the installation ``python`` belongs to (its test suite left out)."""
    probe = subprocess.run([str(python), "-c", "import sys, sysconfig; print(sys.base_prefix); "
                            "print(sysconfig.get_paths()['purelib']); print(sys.version_info[0], "
                            "sys.version_info[1])"], check=True, capture_output=True, text=True)
    root, purelib, version = probe.stdout.splitlines()
    major, minor = version.split()
    site = Path(purelib)
    owned = {site / line.split(",", 1)[0] for record in site.glob("*.dist-info/RECORD")
             for line in record.read_text().splitlines() if line}
    stdlib = Path(root) / "lib" / f"python{major}.{minor}"

    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        if here == stdlib:
            return {"test"} & set(names)
        if here == site:
            return {n for n in names if (site / n).is_file() and site / n not in owned}
        return set()

    shutil.copytree(root, prefix, symlinks=True, ignore=ignore)
    return str(prefix / "bin" / f"python{major}.{minor}")


def interpreter(version: str) -> str | None:
    """A CPython ``version`` (``"3.9"``) here: this one, else pyenv's, else None."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    return found[-1] if found else None


def proof_plan(recipe: Recipe, target: Target, lock, prefix: str, mirror: str | None,
               base_python: str | None = None, stand: StandIns | None = None,
               gaps: dict[str, list[str]] | None = None) -> ProofPlan:
    """The recipe's plan on a CPU node of ``target``, cut to its Python environment; with
    ``base_python`` (the base stand-in's interpreter) the environment is made over that base;
    packages in ``stand.in_plan`` are installed by their step at the stand-in's version.
    ``gaps``: ``tree_gaps`` of the mirror (the files each source's snapshot lacks)."""
    facts = from_target(target).model_copy(update={"gpus": []})
    # installed as provision installs by default: with the controller's uv where there is one
    # (pip compiled every module of torch and built sdists once more: nanogpt's proof took 75 s)
    opts = PlanOptions(prefix=prefix, backend="venv", smoke=False, uv=controller_uv()[1],
                       fetch_urls=fetch_urls(recipe, mirror, lock))
    # a patch filled from the run's nodes ({inventory.ib_addresses}: their InfiniBand
    # addresses) cannot be planned for a CPU node without them; like every patch, it is not
    # applied here, so it is left out before planning and named
    left: list[Unexercised] = []
    kept_patches = []
    for patch in recipe.patches:
        held = placeholders(patch.old) + placeholders(patch.new)
        if any(h.startswith("inventory.") for h in held):
            left.append(Unexercised(f"patch:{patch.id}", f"filled from the run's nodes "
                                    f"({', '.join(held)}): a CPU node has none"))
        else:
            kept_patches.append(patch)
    plan = build_plan(recipe.model_copy(update={"patches": kept_patches}), target, facts, lock, opts)
    def unpinned(name: str) -> bool:  # the lock could not find the commit in the mirror
        pin = lock.git_pin(name) if lock is not None else None
        return pin is not None and not pin.verified

    absent = {s.params.name for s in plan.sources()
              if s.params.url not in opts.fetch_urls or unpinned(s.params.name)}
    # Apex is only built with its CUDA extensions: its checkout (and the cutlass submodule
    # some options fetch) serves nothing here
    cuda_built = {s.params.name for s in plan.sources()
                  if any(t.params.dest == s.params.dest for t in plan.apex_builds())}
    for name in sorted(absent):
        pin = lock.git_pin(name) if lock is not None else None
        left.append(Unexercised(f"source {name}", "its commit is in no git mirror here"
                                + (f" ({pin.reason})" if pin is not None and pin.reason else "")))
    sparse: dict[str, list[str]] = {}
    for name, files in sorted((gaps or {}).items()):
        if name in absent or not files:
            continue
        code = [f for f in files if may_be_code(f)]
        if code:  # a tree without them might import or build differently: not checked out
            absent.add(name)
            left.append(Unexercised(f"source {name}", f"the git mirror's snapshot of its commit lacks "
                                    f"{len(files)} file(s), some of which may be code: {', '.join(code[:5])}"))
        else:
            sparse[name] = files
            left.append(Unexercised(f"{len(files)} file(s) of {name}", "absent from the git mirror's "
                                    "snapshot (not code), so its commit is checked out without them: "
                                    + ", ".join(files)))
    unbuilt: dict[str, str] = {}
    unfetched: dict[str, list[str]] = {}  # tree -> the data files of its left-out data step
    kept = []
    for step in plan.steps:
        component = getattr(step.params, "name", None) or getattr(step.params, "component", None)
        if isinstance(step.params, DataParams):  # every later build step of its tree reads its files
            unfetched.setdefault(_tree(plan, step.params.component), []).extend(
                f.name for f in step.params.files)
        why_not = _build_left_out(recipe, step, unfetched) if isinstance(step.params, BuildParams) else None
        if isinstance(step.params, KEPT) and component not in absent | cuda_built and why_not is None:
            if (used := _with_stand_ins(step, base_python, stand)) is not None:
                kept.append(used)
        elif why_not is not None and component not in absent:
            left.append(Unexercised(step.id, why_not))
            src = recipe.source(step.params.name)
            for module in src.build_provides if src is not None else []:
                unbuilt[module] = f"which the left-out {step.id} makes"
        elif type(step.params) in WHY_LEFT_OUT:
            params = step.params
            left.append(Unexercised(step.id, WHY_LEFT_OUT[type(params)].format(
                options=" ".join(getattr(params, "options", []) or []),
                id=getattr(params, "id", step.id), why=(getattr(params, "why", "") or "")[:80])))
    decisions = list(plan.decisions) + (list(stand.decisions) if stand else [])
    return ProofPlan(plan.model_copy(update={"steps": kept, "decisions": decisions}), left,
                     unbuilt=unbuilt, sparse=sparse)


def _tree(plan: Plan, component: str) -> str:
    """The checkout folder of the source ``component`` in ``plan``."""
    return plan.source(component).params.dest


def _build_left_out(recipe: Recipe, step, unfetched: dict[str, list[str]]) -> str | None:
    """Why the build step ``step`` cannot run on this node (None: it can): it reads data the
    proof does not fetch, or the recipe says it needs the base image, which a stand-in is not."""
    why = []
    if files := unfetched.get(step.params.dest):
        why.append(f"reads the recipe's data ({', '.join(files)}), which this proof does not fetch "
                   "(a tree's build commands come after its data: envbuild.plan.data)")
    src = recipe.source(step.params.name)
    if src is not None and src.build_needs_image:
        why.append(f"runs only in the base image {recipe.environment.base_image}, which a stand-in "
                   f"of its Python packages is not: it needs {src.build_needs_image}")
    return "; ".join(why) or None


def tree_gaps(recipe: Recipe, lock, mirror: str | None) -> dict[str, list[str]]:
    """``{source: [paths]}``: the files of each source's pinned commit whose content its git
    mirror lacks (a snapshot that left large files out); sources without gaps are not listed."""
    out = {}
    for src in recipe.sources:
        pin = lock.git_pin(src.name) if lock is not None else None
        sha = pin.sha if pin is not None and pin.verified else src.sha
        repo = mirror_path(src.url, mirror) if mirror else None
        if repo is None or not sha:
            continue
        if files := absent_files(str(repo), sha):
            out[src.name] = files
    return out


def absent_files(repo: str, sha: str) -> list[str]:
    """The paths of ``sha``'s tree whose blob ``repo`` does not hold (none when it lacks the
    commit itself: that is the lock's and the git step's to say)."""
    listed = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "-z", "--full-tree", sha],
                            capture_output=True, text=True)
    if listed.returncode != 0:
        return []
    entries = [e for e in listed.stdout.split("\0") if e]
    blobs = [(e.split("\t", 1)[0].split()[2], e.split("\t", 1)[1]) for e in entries
             if e.split()[1] == "blob"]
    if not blobs:
        return []
    check = subprocess.run(["git", "-C", repo, "cat-file", "--batch-check=%(objectname) %(objecttype)"],
                           input="".join(f"{obj}\n" for obj, _ in blobs), capture_output=True,
                           text=True, check=True)
    missing = {line.split()[0] for line in check.stdout.splitlines() if line.endswith(" missing")}
    return sorted(path for obj, path in blobs if obj in missing)


def check_out_without(fetch_url: str, sha: str, dest: str, files: list[str]) -> None:
    """``dest``: a clone of ``fetch_url`` at ``sha`` with ``files`` left out of the work tree
    (a non-cone sparse checkout), before the plan runs; the plan's git step finds the tree,
    checks the commit out again and checks HEAD, as on any existing tree."""
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", "--", fetch_url, dest], check=True)
    patterns = ["/*"] + ["!/" + f.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?")
                         .replace("[", "\\[") for f in files]
    subprocess.run(["git", "-C", dest, "sparse-checkout", "set", "--no-cone", "--stdin"],
                   input="\n".join(patterns) + "\n", text=True, check=True, capture_output=True)
    subprocess.run(["git", "-C", dest, "-c", "advice.detachedHead=false", "checkout", "--quiet",
                    "--force", sha], check=True, capture_output=True)


def _with_stand_ins(step, base_python: str | None, stand: StandIns | None):
    """``step`` over the base stand-in (environment) or with the in-plan stand-ins (pip)."""
    if isinstance(step.params, EnvironmentParams) and base_python is not None:
        return step.model_copy(update={"params": step.params.model_copy(update={
            "backend": "venv", "interpreter": base_python, "system_site_packages": True,
            "conda_module": None, "base_image": None})})
    if isinstance(step.params, PipInstallParams) and stand is not None and (stand.in_plan or stand.absent):
        reqs = [_stand_in_requirement(r, *stand.in_plan[normalize(r.name)])
                if normalize(r.name) in stand.in_plan else r for r in step.params.requirements
                if normalize(r.name) not in stand.absent]  # no public stand-in: named, not installed
        swapped = {normalize(r.name) for r in step.params.requirements} & (set(stand.in_plan) | stand.absent)
        if not reqs:
            return None
        if swapped:
            return step.model_copy(update={"params": step.params.model_copy(update={
                "requirements": reqs, "index_url": None, "find_links": [], "no_index": False,
                "unverified": [n for n in step.params.unverified if normalize(n) not in swapped],
                "no_build_isolation": [n for n in step.params.no_build_isolation
                                       if normalize(n) not in stand.absent]})})
    return step


def _stand_in_requirement(req, version: str, hashes: list[str]):
    """``req`` at the stand-in's version from PyPI, hash-checked when the lock has its wheel."""
    return req.model_copy(update={"version": version, "hashes": hashes, "index_url": None,
                                  "find_links": None, "requirement": f"{req.name}=={version}"})


PROBE = r"""
import importlib, json, sys, traceback
out = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        out[name] = {"ok": True}
    except BaseException as exc:  # SystemExit from an argparse at import time counts too
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        out[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300], "missing": missing}
print("IMPORT-PROOF " + json.dumps(out))
"""


def import_modules(python: str, modules: list[str], cwd: str, paths: list[str]) -> dict:
    """``{module: {"ok": bool, "error"?, "missing"?}}``, importing in one interpreter run with
    ``paths`` first on sys.path (the script's folder, as Python puts it there)."""
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin", "HOME": cwd,
           "PYTHONDONTWRITEBYTECODE": "1", "WANDB_MODE": "disabled"}
    proc = subprocess.run([python, "-c", PROBE, *modules], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("IMPORT-PROOF ")), None)
    if line is None:
        raise RuntimeError(f"the import probe did not report (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(line.removeprefix("IMPORT-PROOF "))


def node_path_with(python: str, version: str, bin_dir: Path) -> str:
    """A search path whose ``python<version>`` is ``python`` (the plan's venv is made with it)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    link = bin_dir / f"python{version}"
    if not link.exists():
        link.symlink_to(python)
    return f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"


APEX_CUDA_MODULES = frozenset({
    "amp_C", "fused_adam_cuda", "xentropy_cuda", "fused_layer_norm_cuda",
    "scaled_upper_triang_masked_softmax_cuda", "scaled_masked_softmax_cuda",
    "fused_mix_prec_layer_norm_cuda", "fused_weight_gradient_mlp_cuda", "apex"})


@dataclass
class Verdict:
    """What the imports of a proof showed."""

    proven: int
    unproven: list[str]  # "<script>: import <module>: <error>": failures with no named cause
    left: list[Unexercised]  # failures whose cause is named: absent hardware, no stand-in...


def judge(recipe: Recipe, scripts: dict[str, dict], results: dict[str, dict], *, stand: StandIns,
          unbuilt: dict[str, str], checked_out: set[str], patches_applied: bool = False) -> Verdict:
    """Sort each script's import results (``import_modules``): proven, or left out with a named
    cause (optional, replaced by a recipe patch, needs a package with no public stand-in, a
    left-out build, Apex's CUDA build, a source tree not checked out), or unproven.
    ``scripts``: the import fact's scripts by path; ``patches_applied``: the trees were
    patched (an image), so a patched-away import is no longer the script's."""
    cuda_only = APEX_CUDA_MODULES if any(s.install == "apex" for s in recipe.sources) else frozenset()
    sources = {normalize(s.name) for s in recipe.sources}
    out = Verdict(0, [], [])
    for path, result in results.items():
        optional = set(scripts[path]["optional"])
        patched = patched_imports(recipe, scripts[path])
        for module, got in result.items():
            missing = got.get("missing")
            if got["ok"]:
                out.proven += 1
                continue
            if module in optional:
                why = f"optional in {path} ({got['error']})"
            elif module in patched:
                why = (f"patch {patched[module]} replaces its import in {path}"
                       + ("" if patches_applied else "; patches are not applied here")
                       + f" ({got['error']})")
            elif missing and not patches_applied and (hit := patched_away(recipe, scripts[path], missing)):
                why = (f"needs {missing}, whose import patch {hit[0]} replaces in {hit[1]} (the module "
                       f"{module} reaches it); patches are not applied here")
            elif missing and normalize(missing.split(".", 1)[0]) in stand.absent:
                why = f"needs {missing}, which only the base environment has (no public stand-in)"
            elif missing and missing in unbuilt:
                why = f"needs {missing}, {unbuilt[missing]}"
            elif missing and missing.split(".", 1)[0] in cuda_only:
                why = f"needs {missing}: Apex's CUDA build"
            elif missing and normalize(missing.split(".", 1)[0]) in sources - checked_out:
                why = f"needs {missing}, whose source tree is not checked out here"
            else:
                out.unproven.append(f"{path}: import {module}: {got['error']}")
                continue
            out.left.append(Unexercised(module, why))
    return out


def patched_away(recipe: Recipe, script: dict, missing: str) -> tuple[str, str] | None:
    """``(patch id, file)`` of a recipe patch of the script's source tree whose replaced text
    imports ``missing`` (or its top package), in whichever file of the tree: the import a
    module of the script reaches, which the patched tree no longer makes (megatronapp-h100's
    te-absent-stand-in: megatron.arguments reaches transformer_engine)."""
    top = missing.split(".", 1)[0]
    for patch in recipe.patches:
        if patch.component != script["component"] or not patch.old:
            continue
        for name in (missing, top):
            if re.search(rf"^\s*(import {re.escape(name)}\b|from {re.escape(name)} import)", patch.old, re.M):
                return patch.id, patch.file
    return None


def patched_imports(recipe: Recipe, script: dict) -> dict[str, str]:
    """``{module: patch id}`` for the modules whose import line a recipe patch of this script
    replaces (the import fact is read from the script as published, before its patches)."""
    out = {}
    for patch in recipe.patches:
        if patch.component != script["component"] or patch.file != script["path"] or not patch.old:
            continue
        for module in script["modules"]:
            if f"import {module}" in patch.old or f"from {module} import" in patch.old:
                out[module] = patch.id
    return out
