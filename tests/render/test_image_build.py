"""The cpu-reference image built for real with podman, from a base image made here.

One build per run (the ``image`` fixture of tests/conftest.py, shared by the xdist workers and
by the container backend's tests): a Debian bookworm minbase rootfs (the chroot
testbed's cached one: python3, python3-venv, git, ca-certificates) imported as
``localhost/envbuild-base:bookworm``, the context rendered by ``envbuild render ... --format
dockerfile --base localhost/envbuild-base:bookworm --wheelhouse /opt/wheels`` (the CPU torch
wheel is mounted from the context's wheelhouse/ at build time; the other locked packages come
from PyPI), then ``podman build --isolation chroot`` (host network for PyPI; the host's CA
bundle mounted and passed as PIP_CERT) with podman storage under a temp dir. Containers run
with ``--network=none``.

Not exercised here, and why: the GPU recipes' images are rendered and linted
(tests/render/test_render_golden.py); the two container recipes' images (megatron-deepspeed-slurm,
megatronapp) are built over stand-ins of their NGC bases by tests/testbed/test_image_proof.py, where a
git mirror of their sources is at hand (not in CI). Their Apex/extension builds need nvcc. The
devel -> runtime wheel hand-over (COPY --from=devel) is checked as text only. Apptainer cannot be
installed here (no apt candidate), so no .sif build.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import IMAGE_TAG as TAG
from conftest import IMAGE_WHEELS as WHEELS

from envbuild.testbed.podman import build_steps
from support.paths import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE = "localhost/envbuild-base:bookworm"
PREFIX = "/opt/envbuild/cpu-reference"


def test_every_run_step_is_executed(image) -> None:
    dockerfile = (image["context"] / "Dockerfile").read_text()
    runs = [line for line in dockerfile.splitlines() if line.startswith("RUN ")]
    log = image["log"]
    executed = [(text, cached) for text, cached in build_steps(log) if text.startswith("RUN ")]
    assert len(runs) >= 3 and len(executed) == len(runs), log[-2000:]
    assert not any(cached for _, cached in executed)  # the run's one cold build
    assert "Successfully installed" in log and "torch-2.13.0+cpu" in log


def test_verify_and_smoke_inside_the_image(image) -> None:
    out = image["podman"]("run", "--rm", "--network=none", TAG, "sh",
                          f"{PREFIX}/.envbuild/files/verify.sh", "--smoke", timeout=600)
    report = json.loads(out.stdout[: out.stdout.index("}\n") + 1])
    assert report["ok"] is True, report
    assert report["imported"]["torch"] == "2.13.0+cpu" and report["packages"] >= 14
    assert "smoke passed" in out.stdout


def test_the_run_stage_is_not_root_and_cannot_change_the_environment(image) -> None:
    """The image runs as envbuild (uid 10001): the smoke above wrote its folder, but the
    environment installed by root stays as built."""
    script = (f"id -u; id -g; test -w {PREFIX}/.envbuild/smoke && echo smoke-writable; "
              f"{PREFIX}/bin/python -m pip uninstall -y -q einops >/dev/null 2>&1 || echo refused")
    out = image["podman"]("run", "--rm", "--network=none", TAG, "sh", "-c", script, check=False)
    assert out.stdout.split() == ["10001", "10001", "smoke-writable", "refused"], out.stdout + out.stderr


def test_verify_fails_on_a_drifted_package(image) -> None:
    """Fail closed: a package at another version than the lock's is reported (the drift made
    by root, who alone may change the environment)."""
    script = (f"{PREFIX}/bin/python -m pip uninstall -y -q einops && "
              f"sh {PREFIX}/.envbuild/files/verify.sh")
    out = image["podman"]("run", "--rm", "--network=none", "--user", "0", TAG, "sh", "-c", script, check=False)
    assert out.returncode == 1
    assert "einops==0.8.2 is not installed" in out.stdout


def test_labels_name_recipe_lock_and_version(image) -> None:
    out = image["podman"]("image", "inspect", TAG)
    labels = json.loads(out.stdout)[0]["Config"]["Labels"]
    from envbuild.inputs import find_lock
    from envbuild.recipes import load_recipe
    from envbuild.plan.image import image_plan
    from envbuild.targets import load_target

    rec, tgt = load_recipe("cpu-reference"), load_target("local")
    ip = image_plan(rec, tgt, find_lock(rec, tgt), base=BASE, wheelhouse=True)
    assert labels["io.envbuild.recipe"] == "cpu-reference"
    assert labels["io.envbuild.lock.digest"] == ip.plan.lock_digest
    assert labels["org.opencontainers.image.base.name"] == BASE
    assert labels["io.envbuild.version"]


def test_rebuild_of_the_unchanged_context_is_all_cache(image) -> None:
    t0 = time.monotonic()
    out = image["podman"](*image["podman"].build_args(image["context"], TAG + "-again"), timeout=600)
    assert "Using cache" in out.stdout and ": RUN " in out.stdout
    assert time.monotonic() - t0 < max(30.0, image["build_s"] / 4)
    image["podman"]("rmi", TAG + "-again", check=False)


def _inventory(python: list[str], runner=None) -> dict:
    code = ROOT / "envbuild/node/verify_image.py"
    if runner is None:
        out = subprocess.run([*python, str(code), "--inventory"], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)
    return json.loads(runner(*python, f"{PREFIX}/.envbuild/files/verify_image.py", "--inventory").stdout)


def _sources(files: list[str]) -> list[str]:
    """The files without what the installer adds of its own: bytecode (pip compiles it, uv
    does not) and uv's cache note in the dist-info."""
    return [f for f in files if "/__pycache__/" not in f and not f.endswith((".pyc", ".dist-info/uv_cache.json"))]


def test_image_holds_what_provision_installs(image, reference_node, tmp_path) -> None:
    """Equivalence: the same lock gives the same distributions (names, versions and every file
    of each distribution's RECORD) in the image, in a prefix provisioned through Ansible (with
    uv: the run's reference node, cpu-reference's shipped lock, as the image's) and in one made
    by the shell format's run.sh (with pip) on this machine: one recipe, three renderers of its
    plan, one environment.

    Compared: every distribution the plan installs (the lock's). Besides those, each side may
    hold only the venv's seed packages (pip, setuptools), which come from the interpreter's
    ensurepip, not from the lock: cpu-reference pins no pip, so the image's Debian 3.11.2 venv
    seeds pip 23.0.1 where this machine's python3.11 may seed another (found by this test;
    pinning environment.pip in the recipe would make them one)."""
    from envbuild.testbed import chroot

    assert reference_node["rc"] == 5  # provisioned, no smoke (tests/provision/test_provision_uv.py asserts the run)
    plan = json.loads(next(Path(reference_node["run_dir"]).glob("nodes/*/plan.json")).read_text())
    tool = (ROOT / "envbuild/node/verify_image.py").read_text()
    # the reference node's environment, read on a node started over its layer
    with chroot.wheel_cluster(tmp_path / "ref", 1, base=170, wheels=WHEELS, prefix="imgref",
                              layers=[Path(reference_node["layer"])]) as nodes:
        out = nodes[0].ssh(f"{reference_node['prefix']}/bin/python -c {shlex.quote(tool)} --inventory")
    node = json.loads(out.stdout)

    def run_in_image(*argv):
        return image["podman"]("run", "--rm", "--network=none", TAG, *argv)

    img = _inventory([f"{PREFIX}/bin/python"], run_in_image)
    spec = json.loads((image["context"] / "envbuild" / "verify.json").read_text())
    locked = {n.lower().replace("_", "-") for n in spec["packages"]}
    assert len(locked) >= 14 and locked <= set(img) and locked <= set(node)
    for name in sorted(locked):
        assert img[name]["version"] == node[name]["version"], name
        # compared without what each installer adds of its own (pip in the image, uv on the
        # node): every other file must match
        assert _sources(img[name]["files"]) == _sources(node[name]["files"]), f"{name}: files differ"
    seeds = {"pip", "setuptools"}
    assert set(img) - locked <= seeds and set(node) - locked <= seeds, (set(img) ^ set(node))

    # run.sh (`envbuild render --format shell`, live facts of this machine) into a prefix of its
    # own, every step provision ran (no smoke): the same distributions and files as Ansible's
    out, sh_prefix = tmp_path / "sh", tmp_path / "env-sh"
    render = subprocess.run([sys.executable, "-m", "envbuild", "render", "--target", "local", "--format", "shell",
                             "--prefix", str(sh_prefix), "--wheelhouse", str(WHEELS), "-o", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert render.returncode == 0, render.stderr[-2000:]
    # the uv step pushes provision's installer; run.sh installs with the venv's pip (render
    # pushes no binary), so it has no such step
    steps = [s["id"] for s in plan["steps"] if s["id"] != "uv"]
    # pip without bytecode (pip's environment variable for --no-compile; its "no-" options read
    # 0 as "no"): bytecode is never compared (``_sources``), and compiling torch's and sympy's
    # files took 16 of run.sh's 42 s on 2 cores
    run = subprocess.run(["bash", str(out / "run.sh"), *steps], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PIP_NO_COMPILE": "0"})
    assert run.returncode == 0 and "==> done" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    sh = _inventory([str(sh_prefix / "bin" / "python")])
    assert set(sh) == set(node), set(sh) ^ set(node)
    for name in sorted(sh):
        assert sh[name]["version"] == node[name]["version"], name
        assert _sources(sh[name]["files"]) == _sources(node[name]["files"]), f"{name}: files differ (run.sh, Ansible)"
