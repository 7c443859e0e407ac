"""Apex --fast_multihead_attn reads the cutlass submodule (NVIDIA/apex@e2083df5 setup.py runs
`git submodule update --init apex/contrib/csrc/multihead_attn/cutlass` at build time, which
needs the network). The plan fetches it with the checkout instead, from the git mirror:
planned for the options that need it, run by the node-side git action and by the rendered
shell, on repositories the test makes (a superproject whose .gitmodules names an unreachable
https URL, and mirrors of both)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.actions.steps import actions
from envbuild.compat.check import preflight
from envbuild.facts.profile import from_target
from envbuild.node import actions as node_actions
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.plan.resolve import fetch_urls
from envbuild.recipes import load_recipe
from envbuild.render.shell import Where, commands, shipped
from envbuild.targets import load_target
from support.gitrepo import commit, git

pytestmark = pytest.mark.integration

CUTLASS = "apex/contrib/csrc/multihead_attn/cutlass"
CUTLASS_URL = "https://github.com/NVIDIA/cutlass.git"


DATE = "2023-03-01T12:00:00Z"  # the commits' (nothing here reads it)


@pytest.fixture
def mirror(tmp_path: Path) -> dict:
    """mirror/NVIDIA/apex.git (a superproject with the cutlass submodule, as at e2083df5) and
    mirror/NVIDIA/cutlass.git; .gitmodules names the real https URL, which is never reached."""
    cut = tmp_path / "cutlass-work"
    cut_sha = commit(cut, {"cutlass.h": "// cutlass\n"}, date=DATE)
    root = tmp_path / "mirror" / "NVIDIA"
    root.mkdir(parents=True)
    git("clone", "-q", "--bare", str(cut), str(root / "cutlass.git"), cwd=tmp_path, date=DATE)
    sup = tmp_path / "apex-work"
    commit(sup, {"setup.py": "print('apex')\n"}, date=DATE, branch="master")
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(cut), CUTLASS, cwd=sup, date=DATE)
    git("config", "-f", ".gitmodules", f"submodule.{CUTLASS}.url", CUTLASS_URL, cwd=sup, date=DATE)
    git("add", ".gitmodules", cwd=sup, date=DATE)
    git("commit", "-qm", "cutlass submodule", cwd=sup, date=DATE)
    sha = git("rev-parse", "HEAD", cwd=sup, date=DATE)
    git("clone", "-q", "--bare", str(sup), str(root / "apex.git"), cwd=tmp_path, date=DATE)
    return {"root": tmp_path / "mirror", "apex": root / "apex.git", "cutlass": root / "cutlass.git",
            "sha": sha, "cut_sha": cut_sha, "tmp": tmp_path}


def _apex_step(recipe: str, git_mirror: Path | None):
    rec, tgt = load_recipe(recipe), load_target("azure-nd96")
    opts = PlanOptions(fetch_urls=fetch_urls(rec, str(git_mirror)) if git_mirror else {})
    plan = build_plan(rec, tgt, from_target(tgt), None, opts)
    return next(s for s in plan.steps if s.id == "git:apex")


def test_planned_only_for_options_that_read_the_submodule(mirror) -> None:
    step = _apex_step("opt-175b-azure", mirror["root"])  # --fast_multihead_attn
    assert step.params.submodules == [CUTLASS]
    assert step.params.submodule_mirrors == {CUTLASS_URL: str(mirror["cutlass"])}
    no_mirror = _apex_step("opt-175b-azure", None)
    assert no_mirror.params.submodules == [CUTLASS] and no_mirror.params.submodule_mirrors == {}
    alpa = _apex_step("alpa-megatron", mirror["root"])  # --cpp_ext --cuda_ext only
    assert alpa.params.submodules == [] and "submodules" not in alpa.params.model_dump()


def test_the_compat_rule_says_what_the_plan_fetches(mirror) -> None:
    """apex-fast-mha-git tells the reviewer that envbuild checks cutlass out with Apex: the path
    and URL it names are the ones the plan's git step fetches (from the mirror's copy here)."""
    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    row = next(v for v in preflight(rec, tgt, from_target(tgt)).warnings if v.rule == "apex-fast-mha-git")
    step = _apex_step("opt-175b-azure", mirror["root"])
    assert step.params.submodules and step.params.submodule_mirrors
    for path in step.params.submodules:
        assert path in row.message and "checks it out with Apex" in row.message
    for url in step.params.submodule_mirrors:
        assert url in row.message
    assert "envbuild.plan.build:_submodules" in row.why and "--git-mirror" in row.fix


def _checkout(mirror, dest: Path) -> dict:
    return {"op": "git", "fetch_url": str(mirror["apex"]), "url": "https://github.com/NVIDIA/apex",
            "ref": "master", "sha": mirror["sha"], "dest": str(dest), "submodules": [CUTLASS],
            "submodule_mirrors": {CUTLASS_URL: str(mirror["cutlass"])}}


def test_node_git_action_fetches_the_submodule_from_the_mirror(mirror) -> None:
    dest = mirror["tmp"] / "node" / "src" / "apex"
    result = node_actions.run_actions([_checkout(mirror, dest)])
    assert result["changed"]
    assert (dest / CUTLASS / "cutlass.h").is_file()
    assert git("rev-parse", "HEAD", cwd=dest / CUTLASS, date=DATE) == mirror["cut_sha"]
    assert git("status", "--porcelain", cwd=dest, date=DATE) == ""  # the tree is the commit (git effect holds)
    again = node_actions.run_actions([_checkout(mirror, dest)])
    assert not again["changed"]


def test_without_the_mirror_copy_the_unreachable_url_fails_loudly(mirror, monkeypatch) -> None:
    dest = mirror["tmp"] / "node2" / "apex"
    action = dict(_checkout(mirror, dest), submodule_mirrors={})
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")  # never try the network from a test
    with pytest.raises(node_actions.ActionFailed, match="submodule update"):
        node_actions.run_actions([action])


def test_rendered_shell_fetches_the_submodule_from_the_mirror(mirror) -> None:
    step = _apex_step("opt-175b-azure", mirror["root"])
    act = next(a for a in actions(step, "/unused") if a.op == "git")
    dest = mirror["tmp"] / "shell" / "apex"
    act = act.model_copy(update={"dest": str(dest), "fetch_url": str(mirror["apex"]), "sha": mirror["sha"]})
    files = mirror["tmp"] / "files"
    for rel, item in shipped([act]).items():  # the node tool and the action's file
        (files / rel).parent.mkdir(parents=True, exist_ok=True)
        (files / rel).write_text(item if isinstance(item, str) else item.read_text())
    script = "set -e\n" + "\n".join(commands([act], Where(files=str(files), python=sys.executable))) + "\n"
    subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True)
    assert (dest / CUTLASS / "cutlass.h").is_file()
