"""A module-based venv (Polaris: ``module load conda/2023-10-04``, then a venv with
``--system-site-packages``) is made by the module's own ``python3``, never by an interpreter the
facts found before the module was loaded; a module whose Python is not the recipe's is refused.

The plan's action is run for real here with a stand-in ``module`` shell function (no
Lmod on this machine) that puts a folder with its own ``python3`` first on PATH, as the
ALCF modulefile does with its conda's bin folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.actions.model import Run
from envbuild.actions.steps import module_venv_argv, plan_actions
from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target

pytestmark = pytest.mark.process

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
OTHER = "3.10" if HERE != "3.10" else "3.12"


def polaris_environment_runs() -> list[Run]:
    recipe, target = load_recipe("polaris-megatron-deepspeed"), load_target("polaris")
    plan = resolve(recipe, target, from_target(target), None, PlanOptions(host=target.name)).plan
    return [a for step, acts in plan_actions(plan) if step.id == "environment" for a in acts if isinstance(a, Run)]


def test_polaris_venv_is_made_by_the_module_python_after_module_load():
    runs = polaris_environment_runs()
    made = [r for r in runs if "module load" in " ".join(r.argv)]
    assert len(made) == 1
    argv = made[0].argv
    assert argv[:5] == ["bash", "-c", 'module load "$1" && shift && exec "$@"', "bash", "conda/2023-10-04"]
    # the module's python3 (first on PATH once loaded), never a path from the node's facts
    assert argv[5] == "python3" and not any(w.startswith("/usr/bin/python") for w in argv)
    assert argv == module_venv_argv("conda/2023-10-04", "3.10", argv[-1], True)
    assert argv[-2:] == ["--system-site-packages", argv[-1]] and argv[-1].endswith("/polaris-megatron-deepspeed")


@pytest.fixture
def module_env(tmp_path: Path) -> dict[str, str]:
    """A ``module`` function exported to bash: ``module load X`` puts tmp/mod/bin first on PATH,
    where ``python3`` is this test's interpreter (the "module's" Python)."""
    bin_dir = tmp_path / "mod" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASH_FUNC_")}
    env["BASH_FUNC_module%%"] = f'() {{ [ "$1" = load ] && export PATH={bin_dir}:"$PATH"; }}'
    return env


def test_module_python_makes_the_venv(module_env, tmp_path):
    prefix = tmp_path / "env"
    p = subprocess.run(module_venv_argv("conda/stand-in", HERE, str(prefix), True), env=module_env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    cfg = (prefix / "pyvenv.cfg").read_text()
    # made by the module's python3 (its folder is the venv's home), seeing the module's packages
    assert f"home = {tmp_path / 'mod' / 'bin'}" in cfg
    assert "include-system-site-packages = true" in cfg


def test_module_python_of_another_version_is_refused(module_env, tmp_path):
    prefix = tmp_path / "env"
    p = subprocess.run(module_venv_argv("conda/stand-in", OTHER, str(prefix), True), env=module_env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert f"is Python {HERE}, the recipe asks for {OTHER}" in p.stderr
    assert not prefix.exists()
