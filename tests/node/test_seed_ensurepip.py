"""``SEED_ENSUREPIP`` (envbuild.actions.steps): a venv made --without-pip, whose recipe locks no
pip, gets from uv what its interpreter's ensurepip would have installed: the same distributions
at the same versions as ``python -m venv`` gives, pip working, on real interpreters of this
machine (python.org builds 3.10 to 3.12, where the planner asks for it: ensurepip's ``_bundled`` folder; Debian's
/usr/bin/python3.11: /usr/share/python-wheels). An ensurepip that names no wheel runs itself;
a Python without ensurepip says what to install (for setuptools alone too, a plan's seed_setuptools)."""

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
PYENV = Path("/root/.pyenv/versions")
PYTHONS = sorted(str(p) for p in PYENV.glob("3.1[012].*/bin/python3") if p.exists()) or [sys.executable]
PYTHONS += [p for p in ["/usr/bin/python3.11"] if Path(p).exists()]
WANTED = "import ensurepip, json; print(json.dumps({k: p.version for k, p in ensurepip._get_packages().items()}))"
HAVE = ("import importlib.metadata as m, json; print(json.dumps({d.metadata['Name'].lower(): "
        "[d.version, (d.read_text('INSTALLER') or '').strip()] for d in m.distributions()}))")


def installed(python) -> dict:
    """{name: [version, INSTALLER]} of the environment's distributions (-I: none of the
    caller's PYTHONPATH)."""
    return json.loads(run(python, "-I", "-c", HAVE))


def run(*argv, **kw) -> str:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=True, **kw).stdout


@pytest.mark.skipif(UV is None, reason="no uv on this machine")
@pytest.mark.parametrize("python", PYTHONS)
def test_the_venv_gets_what_python_m_venv_gives_it(python, tmp_path):
    made = tmp_path / "made"  # as `python -m venv` makes it: ensurepip
    run(python, "-m", "venv", made)
    seeded = tmp_path / "env"
    run(python, "-m", "venv", "--without-pip", seeded)
    py = seeded / "bin" / "python"
    assert installed(py) == {}
    wanted = json.loads(run(py, "-c", WANTED))
    out = run(py, "-c", SEED_ENSUREPIP, ",".join(sorted(wanted)), *install_argv(str(seeded), "uv", UV))
    assert "running ensurepip" not in out
    have = installed(py)
    assert {k: v for k, (v, _) in have.items()} == wanted == {
        k: v for k, (v, _) in installed(made / "bin" / "python").items()}
    assert {i for _, i in have.values()} == {"uv"}
    assert run(py, "-m", "pip", "--version").startswith(f"pip {wanted['pip']} from {seeded}")
    assert run(seeded / "bin" / "pip", "--version").startswith(f"pip {wanted['pip']} ")
    # the step's effect names them at any version: it holds now, and not once pip is gone
    step = Step(id="pip-tooling", title="t", params=P.PipToolingParams(
        requirements=[], installer="uv", uv=UV, seed_ensurepip=sorted(wanted)))
    plan = Plan(recipe="r", target="t", host="local", prefix=str(seeded), backend="venv", steps=[step])
    eff = effect_data(plan)["pip-tooling"]
    assert eff["dists"] == dict.fromkeys(sorted(wanted))
    ctx = EffectContext(str(seeded / ".envbuild" / "state"))
    assert check_effect(eff, ctx)["ok"]
    run(UV, "pip", "uninstall", "--python", py, "pip")
    res = check_effect(eff, ctx)
    assert not res["ok"] and res["detail"].split()[0] == "pip", res  # pip is what broke
    [seed] = actions(step, str(seeded))  # only the seed: the recipe locks no tooling
    assert seed.argv[:4] == [str(py), "-c", SEED_ENSUREPIP, ",".join(sorted(wanted))]


@pytest.mark.skipif(UV is None or sys.version_info >= (3, 12), reason="no uv, or a Python whose ensurepip has no setuptools")
def test_only_the_named_wheels_go_in(tmp_path):
    """A recipe that locks setuptools (and no pip) gets ensurepip's pip alone: pip-tooling
    installs its setuptools at the locked version next."""
    prefix = tmp_path / "env"
    run(sys.executable, "-m", "venv", "--without-pip", prefix)
    py = prefix / "bin" / "python"
    run(py, "-c", SEED_ENSUREPIP, "pip", *install_argv(str(prefix), "uv", UV))
    assert sorted(installed(py)) == ["pip"]


# the projects each kind of seed names (seed_ensurepip; seed_setuptools)
SEEDS = {"ensurepip": "pip,setuptools", "setuptools": "setuptools"}


@pytest.mark.skipif(UV is None, reason="no uv on this machine")
@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_an_ensurepip_that_names_no_wheel_runs_itself(seed, tmp_path):
    """A stand-in for Python 3.8/3.9's ensurepip (no ``_get_packages``) first on the path: the
    code runs ``-m ensurepip --upgrade --default-pip``, as ``python -m venv`` would have."""
    names = SEEDS[seed]
    old = tmp_path / "old" / "ensurepip"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("_SETUPTOOLS_VERSION = '56.0.0'\n")
    (old / "__main__.py").write_text(f"import sys\nopen({str(tmp_path / 'ran')!r}, 'w').write(' '.join(sys.argv[1:]))\n")
    prefix = tmp_path / "env"
    run(sys.executable, "-m", "venv", "--without-pip", prefix)
    out = run(prefix / "bin" / "python", "-c", SEED_ENSUREPIP, names, *install_argv(str(prefix), "uv", UV),
              env={"PYTHONPATH": str(old.parent), "PATH": "/usr/bin:/bin"})
    assert "no wheels from ensurepip (none named); running ensurepip" in out
    assert (tmp_path / "ran").read_text() == "--upgrade --default-pip"


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_a_python_without_ensurepip_says_what_to_install(seed, tmp_path):
    """Debian's Python without its python3.X-venv package has no ensurepip: said, not a traceback."""
    names = SEEDS[seed]
    hidden = tmp_path / "hide"
    hidden.mkdir()
    (hidden / "ensurepip.py").write_text("raise ImportError('no ensurepip here')\n")
    prefix = tmp_path / "env"
    run(sys.executable, "-m", "venv", "--without-pip", prefix)
    p = subprocess.run([str(prefix / "bin" / "python"), "-c", SEED_ENSUREPIP, names, "true"], capture_output=True,
                       text=True, env={"PYTHONPATH": str(hidden), "PATH": "/usr/bin:/bin"})
    major, minor = sys.version_info[:2]
    assert p.returncode == 1 and f"apt-get install python{major}.{minor}-venv" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
