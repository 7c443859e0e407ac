"""The prefix is the environment: the environment step's effect (node side,
``envbuild.node.effects``) and its actions (``envbuild.actions.steps``) on a real venv.

The effect says why a venv is not the prefix's own any more (an interpreter whose sys.prefix is
elsewhere, a missing pyvenv.cfg, system site packages switched on, a .pth file no package owns);
the step's actions, run by the node-side runner, make it whole again with its packages kept; the
pruning action and the check agree on which .pth files are foreign.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.actions.effects import effect_data
from envbuild.node.actions import run_actions
from envbuild.node.effects import EffectContext, check_effect, foreign_pth
from envbuild.actions.steps import PRUNE_PTH, actions
from envbuild.plan import params as P
from envbuild.plan.model import Plan, Step

pytestmark = pytest.mark.integration

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def plan_for(prefix: Path) -> Plan:
    params = P.EnvironmentParams(backend="venv", prefix=str(prefix), python=PY, interpreter=sys.executable)
    return Plan(recipe="r", target="t", host="local", prefix=str(prefix), backend="venv",
                steps=[Step(id="environment", title="venv", params=params)])


def check(plan: Plan) -> dict:
    eff = effect_data(plan)["environment"]
    return check_effect(eff, EffectContext(str(Path(plan.prefix) / ".envbuild" / "state")))


def make(plan: Plan) -> None:
    acts = [a.model_dump(mode="json") for a in actions(plan.steps[0], plan.prefix)]
    run_actions(acts)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv made by the environment step's own actions, with one owned .pth (a fake package
    whose RECORD lists it) and one of envbuild's."""
    prefix = tmp_path_factory.mktemp("venv") / "env"
    plan = plan_for(prefix)
    make(plan)
    site = Path(subprocess.run([str(prefix / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    info = site / "owner-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: owner\nVersion: 1.0\n")
    (site / "owner.pth").write_text(str(site) + "\n")
    (info / "RECORD").write_text("owner.pth,sha256=x,1\nowner-1.0.dist-info/METADATA,,\n")
    (site / "envbuild-tree.pth").write_text("/somewhere\n")
    return plan, prefix, site


def test_a_fresh_venv_holds(venv):
    plan, prefix, site = venv
    res = check(plan)
    assert res["ok"], res
    assert foreign_pth(str(site)) == []


def test_foreign_pth_is_seen_then_pruned_by_the_same_rule(venv):
    plan, prefix, site = venv
    (site / "zz-evil.pth").write_text("import os\n")
    (site / "easy-install.pth").write_text("/x\n")  # no .egg-link: no develop install owns it
    assert foreign_pth(str(site)) == ["easy-install.pth", "zz-evil.pth"]
    res = check(plan)
    assert not res["ok"] and "zz-evil.pth" in res["detail"] and "easy-install.pth" in res["detail"], res
    out = subprocess.run([str(prefix / "bin" / "python"), "-c", PRUNE_PTH], capture_output=True, text=True, check=True)
    assert "zz-evil.pth" in out.stdout and "easy-install.pth" in out.stdout
    left = sorted(p.name for p in site.glob("*.pth"))
    assert "owner.pth" in left and "envbuild-tree.pth" in left and "zz-evil.pth" not in left
    assert foreign_pth(str(site)) == [] and check(plan)["ok"]
    # with a develop install's .egg-link, easy-install.pth is owned, by both rules
    (site / "thing.egg-link").write_text("/src/thing\n.\n")
    (site / "easy-install.pth").write_text("/src/thing\n")
    assert foreign_pth(str(site)) == []
    subprocess.run([str(prefix / "bin" / "python"), "-c", PRUNE_PTH], check=True)
    assert (site / "easy-install.pth").exists()
    for name in ("thing.egg-link", "easy-install.pth"):
        (site / name).unlink()


@pytest.mark.parametrize("case", ["wrapper", "no-cfg", "system-site"])
def test_a_venv_that_is_not_the_prefixs_own_is_seen_and_made_again(venv, case, tmp_path):
    plan, prefix, site = venv
    py, cfg = prefix / "bin" / "python", prefix / "pyvenv.cfg"
    if case == "wrapper":
        py.unlink()
        py.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        py.chmod(0o755)
        why = "not the environment's own interpreter"
    elif case == "no-cfg":
        cfg.unlink()
        why = "pyvenv.cfg is missing"
    else:
        cfg.write_text(cfg.read_text().replace("include-system-site-packages = false",
                                               "include-system-site-packages = true"))
        why = "include-system-site-packages = true, planned false"
    res = check(plan)
    assert not res["ok"] and why in res["detail"], res
    make(plan)
    res = check(plan)
    assert res["ok"], res
    assert py.is_symlink() and "include-system-site-packages = false" in cfg.read_text()
    assert (site / "owner-1.0.dist-info" / "RECORD").is_file()  # the packages stay
