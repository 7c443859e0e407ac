"""Recipe Patch objects applied to a real tree through envbuild.patches.tree."""

from __future__ import annotations

import shutil

import pytest

from envbuild.errors import CheckFailed, InputError
from envbuild.patches.tree import apply_patch
from envbuild.recipes.schema import Patch
from support.paths import DATA

SHAPES = DATA / "apex_shapes"


def test_replace_patch_dry_run_apply_and_again(tmp_path):
    (tmp_path / "train.py").write_text("if share and True:\n    allreduce()\n")
    p = Patch(id="untie", kind="replace", component="megatron", file="train.py",
              old="if share and True:", new="if share and False:", why="disable tie embedding")
    dry = apply_patch(p, tmp_path)
    assert dry.status == "applied" and not dry.applied and "+if share and False:" in dry.diff
    assert apply_patch(p, tmp_path, apply=True).applied
    again = apply_patch(p, tmp_path, apply=True)
    assert again.status == "already-applied" and not again.applied and again.diff == ""


def test_expect_and_failures(tmp_path):
    (tmp_path / "setup.py").write_text("x = 1\n")
    ok = Patch(id="e", kind="expect", component="c", new="x = 1", why="fork has it")
    assert apply_patch(ok, tmp_path).decision == "unchanged"
    bad = Patch(id="r", kind="replace", component="c", old="y = 1", new="y = 2", why="w")
    with pytest.raises(CheckFailed, match="patch r"):
        apply_patch(bad, tmp_path, apply=True)
    missing = Patch(id="m", kind="replace", component="c", file="nope.py", old="a", new="b", why="w")
    with pytest.raises(InputError):
        apply_patch(missing, tmp_path)


def test_apex_kind_goes_through_the_decision(tmp_path):
    src = tmp_path / "apex"
    shutil.copytree(SHAPES / "c_tuple", src)
    p = Patch(id="apex-check", kind="apex-cuda-check", component="apex", why="cu113 torch on 11.4")
    assert apply_patch(p, src, apply=True, nvcc="11.4", torch_cuda="11.3").applied
    assert apply_patch(p, src, nvcc="11.8", torch_cuda="12.1").decision == "refused"
