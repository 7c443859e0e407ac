"""``SEED_ENSUREPIP`` naming setuptools (envbuild.actions.steps; a plan's ``seed_setuptools``): a
venv made --without-pip gets the setuptools
wheel its interpreter's ensurepip would have installed, put in by uv, on real interpreters of
this machine: the one running the tests (a python.org build: ensurepip's ``_bundled`` folder)
and Debian's /usr/bin/python3.11 where present (its ensurepip reads /usr/share/python-wheels).
An ensurepip that names no wheel (before Python 3.10) runs itself, and a Python without
ensurepip says what to install: tests/node/test_seed_ensurepip.py, for both seeds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.actions.effects import effect_data
from envbuild.actions.steps import SEED_ENSUREPIP, actions, install_argv
from envbuild.node.effects import EffectContext, check_effect
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step

pytestmark = pytest.mark.integration

UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
# Pythons up to 3.11 (the planner seeds nothing from 3.12: their ensurepip brings no setuptools)
PYTHONS = ([sys.executable] if sys.version_info < (3, 12) else []) + [
    p for p in ["/usr/bin/python3.11"] if Path(p).exists()]
ENSUREPIP = ("import ensurepip, json; p = ensurepip._get_packages()['setuptools']; "
             "print(json.dumps([p.version, p.wheel_path or p.wheel_name]))")
SHOW = ("import importlib.metadata as m, json; d = m.distribution('setuptools'); "
        "print(json.dumps([d.version, (d.read_text('INSTALLER') or '').strip(), d.locate_file('').as_posix()]))")


def run(*argv, **kw) -> str:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=True, **kw).stdout


@pytest.mark.skipif(UV is None or not PYTHONS, reason="no uv, or no Python up to 3.11, on this machine")
@pytest.mark.parametrize("python", PYTHONS or [None])
def test_the_venv_gets_the_setuptools_ensurepip_would_install(python, tmp_path):
    prefix = tmp_path / "env"
    run(python, "-m", "venv", "--without-pip", prefix)
    py = prefix / "bin" / "python"
    version, wheel = json.loads(run(py, "-c", ENSUREPIP))
    assert run(py, "-c", "import importlib.util as u; print(u.find_spec('setuptools'))").strip() == "None"
    out = run(py, "-c", SEED_ENSUREPIP, "setuptools", *install_argv(str(prefix), "uv", UV))
    assert "running ensurepip" not in out
    installed, installer, where = json.loads(run(py, "-c", SHOW))
    assert (installed, installer) == (version, "uv") and where.startswith(str(prefix))
    assert Path(wheel).name.startswith(f"setuptools-{version}-")
    # the step's effect names it at any version: it holds now, and not once setuptools is gone
    step = Step(id="pip-tooling", title="t", params=P.PipToolingParams(
        requirements=[], installer="uv", uv=UV, seed_setuptools=True))
    plan = Plan(recipe="r", target="t", host="local", prefix=str(prefix), backend="venv", steps=[step])
    eff = effect_data(plan)["pip-tooling"]
    assert eff["dists"] == {"setuptools": None}
    ctx = EffectContext(str(prefix / ".envbuild" / "state"))
    assert check_effect(eff, ctx)["ok"]
    run(UV, "pip", "uninstall", "--python", py, "setuptools")
    res = check_effect(eff, ctx)
    assert not res["ok"] and "setuptools" in res["detail"], res
    assert actions(step, str(prefix))[0].argv[:4] == [str(py), "-c", SEED_ENSUREPIP, "setuptools"]
