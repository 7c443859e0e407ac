"""An Apex stand-in (tests/data/apex_standin: 2021-era setup.py shape, C++ extension only)
built through the real playbook path on this CPU machine.

* ``envbuild provision --target local`` with a git mirror laid out as ``NVIDIA/apex.git``:
  the wheel is built once into the controller cache under the planner's cache key, installed,
  ``apex_C`` imports; a second provision onto another prefix installs the cached wheel and
  builds nothing; a bundle made from that cache carries the wheel (prebuilt), and a provision
  from it under a fresh ``ENVBUILD_HOME`` installs those bytes, building nothing.
* The patched path (nvcc 12.4 vs torch built for CUDA 12.1, ``--cuda_ext``): nvcc is a double
  replaying the captured ``nvcc -V`` of the H100 node with the release changed, and torch's
  CUDA side comes from ``$APEX_STANDIN_TORCH_CUDA`` because no CUDA torch wheel can be
  installed here (see the stand-in's README). The unpatched setup.py raises; the plan's patch
  step relaxes it, the diff is recorded and the build succeeds; a major mismatch still raises.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.paths import DATA

from envbuild.fsio import sha256_file


STANDIN = DATA / "apex_standin"
WHEELS = Path("/opt/wheels")
NVCC_CAPTURE = Path("/work/shared/fixtures/nodes/h100-ubuntu2404-cuda13/nvcc-version.txt")
APEX_DATE = "2021-02-23T12:00:00Z"  # before pyproject.toml (2023-06-12): setup.py era


def git(*args, cwd, env=None):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}).stdout.strip()


def recipe_yaml(sha: str, *, options: list[str], torch_cuda: str = "cpu", env: dict | None = None) -> str:
    src = {"name": "apex", "url": "https://github.com/NVIDIA/apex", "ref": "master", "sha": sha,
           "install": "apex", "build_options": options, "env": env or {},
           "why": "Apex stand-in (tests/data/apex_standin)"}
    return yaml.safe_dump({
        "schema": 1, "name": "apex-standin", "title": "Apex stand-in",
        "description": "torch CPU and an Apex-shaped tree", "python": "3.11", "targets": ["local"],
        "published": {"url": "https://example.invalid/apex-standin"},
        "environment": {"kind": "venv"},
        "packages": [{"name": "torch", "version": "2.13.0", "cuda": torch_cuda, "why": "torch"}],
        "sources": [src],
        "patches": [{"id": "apex-cuda-check", "kind": "apex-cuda-check", "component": "apex",
                     "why": "relax Apex's minor CUDA check"}],
        "import_check": ["torch", "apex"],
    }, sort_keys=False)


@pytest.fixture(scope="module")
def mirror(module_tmp):
    """``<mirror>/NVIDIA/apex.git`` holding the stand-in as one 2021-dated commit."""
    if not any(WHEELS.glob("torch-2.13.0*cp311*.whl")):
        pytest.skip("no torch 2.13.0 cp311 wheel in /opt/wheels")
    base = module_tmp("apexmirror")
    work = base / "work"
    shutil.copytree(STANDIN, work)
    git("init", "-q", "-b", "master", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-qm", "apex stand-in", cwd=work,
        env={"GIT_AUTHOR_DATE": APEX_DATE, "GIT_COMMITTER_DATE": APEX_DATE})
    (base / "mirror" / "NVIDIA").mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(base / "mirror" / "NVIDIA" / "apex.git"), cwd=base)
    return {"dir": base / "mirror", "sha": git("rev-parse", "HEAD", cwd=work), "work": work}


def provision_cli(recipe: Path, prefix: Path, mirror_dir: Path, home: Path, lock: Path | None = None):
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", str(recipe),
            "--git-mirror", str(mirror_dir), "--wheelhouse", str(WHEELS), "--prefix", str(prefix),
            "--no-smoke", "--json"] + (["--lock", str(lock)] if lock else [])
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "ENVBUILD_HOME": str(home)})
    lines = [json.loads(line) for line in p.stdout.splitlines()]  # JSON Lines: events, then the result
    assert lines and lines[-1].get("type") == "result", p.stdout[-2000:] + p.stderr[-2000:]
    out = lines[-1]
    return p.returncode, out, Path(out["run_dir"])


def env_python(prefix: Path, code: str) -> str:
    return subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, check=True).stdout.strip()


IMPORT_APEX = ("import torch, apex, apex_C; print(apex_C.built_with_torch, apex_C.flat_offsets([2, 3]), "
               "apex.has_cpp_ext(), apex.__file__)")


@pytest.mark.integration
@pytest.mark.slow
def test_cpp_ext_wheel_built_once_cached_then_reused(mirror, tmp_path):
    recipe = tmp_path / "apex-standin.yaml"
    recipe.write_text(recipe_yaml(mirror["sha"], options=["--cpp_ext"]))
    home = tmp_path / "home"
    first = tmp_path / "env1"
    rc, out, run = provision_cli(recipe, first, mirror["dir"], home)
    assert rc == 5, json.dumps(out["results"], indent=1)[-3000:]  # no smoke: nothing judged (NOT JUDGED, exit 5)

    from envbuild.plan.model import Plan

    plan = Plan.model_validate_json((run / "nodes" / "local" / "plan.json").read_text())
    decisions = {d.subject: d.outcome for d in plan.decisions}
    assert decisions["patch:apex-cuda-check"] == "cpu-only"  # --cpp_ext: the check never runs
    assert not plan.patches()
    key = plan.apex_builds()[0].params.cache_key
    cached = list((home / "cache" / "wheels" / key).glob("*.whl"))
    assert [w.name for w in cached] == [next((first / ".envbuild/wheels" / key).glob("*.whl")).name]
    wheel_mtime = cached[0].stat().st_mtime_ns
    log = (run / "nodes" / "local" / "log.txt").read_text()
    assert log.count("running bdist_wheel") == 1

    line = env_python(first, IMPORT_APEX)
    assert line.startswith(env_python(first, "import torch; print(torch.__version__.split('+')[0])"))
    assert "[0, 2, 5] True" in line
    assert str(first / "lib") in line  # installed from the wheel into site-packages, not the tree

    second = tmp_path / "env2"
    rc, out, run2 = provision_cli(recipe, second, mirror["dir"], home, lock=run / "lock.lock")
    assert rc == 5, json.dumps(out["results"], indent=1)[-3000:]  # no smoke: nothing judged (NOT JUDGED, exit 5)
    plan2 = Plan.model_validate_json((run2 / "nodes" / "local" / "plan.json").read_text())
    assert plan2.apex_builds()[0].params.cache_key == key
    assert "apex:apex" in out["results"]["local"]["changed"]  # installed ...
    assert "running bdist_wheel" not in (run2 / "nodes" / "local" / "log.txt").read_text()  # ... not built
    # the cached wheel was copied to the node's wheel folder (nothing else was put there)
    assert [w.name for w in (second / ".envbuild" / "wheels" / key).iterdir()] == [cached[0].name]
    assert [w.stat().st_mtime_ns for w in (home / "cache" / "wheels" / key).glob("*.whl")] == [wheel_mtime]
    assert "[0, 2, 5] True" in env_python(second, IMPORT_APEX)

    # carried: a bundle made from this cache packs the wheel as prebuilt; a controller that never
    # built it (a fresh ENVBUILD_HOME, as a GPU node's is) provisions from the bundle, offline,
    # and installs that wheel without building (run 15's second lease, docs/results/h200-run15.md)
    bundle = tmp_path / "apex.tar"
    made = subprocess.run([sys.executable, "-m", "envbuild", "bundle", str(recipe), "--target", "local",
                           "--lock", str(run / "lock.lock"), "--git-mirror", str(mirror["dir"]),
                           "--wheelhouse", str(WHEELS), "-o", str(bundle)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "ENVBUILD_HOME": str(home)})
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    assert f"{key}: prebuilt wheel {cached[0].name} from the build cache" in made.stdout + made.stderr
    fresh, third = tmp_path / "fresh-home", tmp_path / "env3"
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", str(recipe),
                        "--bundle", str(bundle), "--bundle-sha256", sha256_file(bundle),  # made from our own lock
                        "--prefix", str(third), "--no-smoke", "--json"],
                       capture_output=True, text=True, timeout=1200, env={**os.environ, "ENVBUILD_HOME": str(fresh)})
    assert p.returncode == 5, p.stdout[-3000:] + p.stderr[-2000:]
    result = [json.loads(line) for line in p.stdout.splitlines()][-1]
    run3 = Path(result["run_dir"])
    record = json.loads((run3 / "run.json").read_text())["bundle"]
    assert record["prebuilt"] == [key] and record["prebuilt_seeded"] == [key] and record["prebuilt_not_used"] == []
    assert "running bdist_wheel" not in (run3 / "nodes" / "local" / "log.txt").read_text()
    carried = next((fresh / "cache" / "wheels" / key).glob("*.whl"))
    assert carried.read_bytes() == cached[0].read_bytes()  # the bytes built once, not a rebuild
    assert "[0, 2, 5] True" in env_python(third, IMPORT_APEX)


def fake_nvcc(folder: Path, release: str) -> Path:
    """``<folder>/bin/nvcc`` replaying the captured ``nvcc -V`` with the release changed."""
    captured = NVCC_CAPTURE.read_text()
    (folder / "bin").mkdir(parents=True)
    (folder / "nvcc-version.txt").write_text(captured.replace("13.0", release))
    nvcc = folder / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\ncat {folder / 'nvcc-version.txt'}\n")
    nvcc.chmod(0o755)
    return folder


def setup_check(tree: Path, cuda_home: Path, torch_cuda: str) -> subprocess.CompletedProcess:
    """Run the tree's setup.py CUDA check only (``--cuda_ext --name``) with the controller's torch."""
    return subprocess.run([sys.executable, "setup.py", "--cuda_ext", "--name"], cwd=tree,
                          capture_output=True, text=True,
                          env={**os.environ, "CUDA_HOME": str(cuda_home), "APEX_STANDIN_TORCH_CUDA": torch_cuda})


@pytest.mark.integration
@pytest.mark.slow
def test_minor_mismatch_is_patched_through_the_playbook(mirror, tmp_path):
    from envbuild.facts.gather import gather_local
    from envbuild.facts.uvbin import controller_uv
    from envbuild.lock.make import make_lock
    from envbuild.plan.build import PlanOptions, build_plan
    from envbuild.plan.resolve import fetch_urls
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target
    from envbuild.testbed.local_plan import run_local_plan

    cuda = fake_nvcc(tmp_path / "cuda-12.4", "12.4")
    unpatched = setup_check(mirror["work"], cuda, "12.1")
    assert unpatched.returncode != 0 and "does not match" in unpatched.stderr  # the stand-in's check is real

    env = {"CUDA_HOME": str(cuda), "APEX_STANDIN_TORCH_CUDA": "12.1"}
    # --cuda_ext alone: the check is this test's subject (the stand-in has no .cu sources, so the
    # build after it is the Python package); the C++ compile is the test above's
    options = ["--cuda_ext"]
    (tmp_path / "gpu.yaml").write_text(recipe_yaml(mirror["sha"], options=options, torch_cuda="cu121", env=env))
    (tmp_path / "cpu.yaml").write_text(recipe_yaml(mirror["sha"], options=options, torch_cuda="cpu", env=env))
    gpu_recipe, cpu_recipe = load_recipe(str(tmp_path / "gpu.yaml")), load_recipe(str(tmp_path / "cpu.yaml"))
    target = load_target("local")
    facts = gather_local().model_copy(update={"nvcc": "12.4"})
    lock = make_lock(cpu_recipe, target, git_mirror=mirror["dir"], wheelhouse=WHEELS)
    prefix = tmp_path / "env"
    # the controller's uv installs the packages (as provision's default does): pip took ~19 CPU-s
    # for torch here and the installer is not this test's subject
    opts = PlanOptions(prefix=str(prefix), git_mirror=str(mirror["dir"]), wheelhouse=str(WHEELS), smoke=False,
                       fetch_urls=fetch_urls(gpu_recipe, str(mirror["dir"])), uv=controller_uv()[1])
    plan = build_plan(gpu_recipe, target, facts, lock, opts)
    assert {d.subject: d.outcome for d in plan.decisions}["patch:apex-cuda-check"] == "patched"
    asked = [*plan.patches(), *plan.apex_builds()]
    assert [s.id for s in plan.steps if s in asked] == ["patch:apex-cuda-check", "apex:apex"]
    # torch +cu121 cannot be downloaded here: install the CPU plan's torch step in its place
    cpu_torch = build_plan(cpu_recipe, target, facts, lock, opts).step("pip:torch")
    plan = plan.model_copy(update={"steps": [cpu_torch if s.id == "pip:torch" else s for s in plan.steps]})

    rc, host, _ = run_local_plan(tmp_path, plan)
    cache = tmp_path / "cache"
    assert rc == 0, (host.failed_step, host.message, host.tail())

    diff = (prefix / ".envbuild" / "patches" / "apex-cuda-check.diff").read_text()
    assert "-    if (bare_metal_major != torch_binary_major) or (bare_metal_minor != torch_binary_minor):" in diff
    assert "+    if bare_metal_major != torch_binary_major:" in diff
    key = plan.step("apex:apex").params.cache_key
    assert len(list((cache / key).glob("*.whl"))) == 1
    assert env_python(prefix, "import apex; print(apex.has_cpp_ext(), apex.__file__)") == \
        f"False {prefix / 'lib/python3.11/site-packages/apex/__init__.py'}"  # built past the check, installed

    tree = prefix / "src" / "apex"
    assert setup_check(tree, cuda, "12.1").returncode == 0  # minor mismatch now tolerated
    major = setup_check(tree, fake_nvcc(tmp_path / "cuda-11.8", "11.8"), "12.1")
    assert major.returncode != 0 and "does not match" in major.stderr  # a major mismatch still raises


@pytest.mark.parametrize("date,has_pyproject,pip,head", [
    ("2021-02-23", False, "24.0", ["setup.py", "--cpp_ext", "bdist_wheel", "-d", "/w"]),
    ("2023-07-01", True, "24.0", ["-m", "pip", "wheel", "--no-deps", "-w", "/w"]),
    ("2025-08-01", True, "24.0", ["-m", "pip", "wheel", "--no-deps", "-w", "/w"]),
])
def test_planned_apex_command_builds_into_the_wheel_folder(date, has_pyproject, pip, head):
    """Every era's planned command writes its wheel where the BuildWheel action looks, once."""
    from envbuild.patches.apex_build import install_command

    cmd = install_command(pip_version=pip, options=["--cpp_ext"], apex_date=date,
                          has_pyproject=has_pyproject, wheel_dir="/w", python="/e/bin/python")
    argv = cmd.argv
    assert argv[0] == "/e/bin/python" and argv[1:1 + len(head)] == head
    assert argv.count("bdist_wheel") + argv.count("wheel") == 1
