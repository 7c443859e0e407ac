"""The Apex decision table and patch_tree on real directories."""

from __future__ import annotations

import shutil

import pytest

from envbuild.errors import InputError
from envbuild.patches.apex import decide, parse_cuda, patch_tree
from support.paths import DATA

SHAPES = DATA / "apex_shapes"


@pytest.mark.parametrize("nvcc,torch_cuda,cuda_ext,outcome", [
    ("11.3", "11.3", True, "unchanged"),
    ("11.3.109", "cu113", True, "unchanged"),
    ("11.4", "11.3", True, "patched"),
    ("12.4", "12.1", True, "patched"),
    ("10.2", "11.1", True, "refused"),
    ("13.0", "12.8", True, "refused"),
    (None, "11.3", True, "refused"),
    ("11.4", None, True, "refused"),
    (None, "11.3", False, "cpu-only"),
    (None, None, False, "cpu-only"),
])
def test_decision_table(nvcc, torch_cuda, cuda_ext, outcome):
    assert decide(nvcc, torch_cuda, cuda_ext=cuda_ext).outcome == outcome


def test_patched_reason_names_versions_and_history():
    d = decide("11.4", "11.3")
    for word in ("11.4", "11.3", "#323", "5f1a73ec", "minor"):
        assert word in d.reason
    assert d.fix is None


def test_refusals_carry_a_fix():
    major = decide("10.2", "11.1")
    assert "torch wheel" in major.fix and "11.1" in major.fix and "10" in major.fix
    no_nvcc = decide(None, "11.3")
    assert "CUDA_HOME" in no_nvcc.fix and "11.3" in no_nvcc.fix


@pytest.mark.parametrize("bad", ["eleven", "11", "11.x"])
def test_bad_versions_are_input_errors(bad):
    with pytest.raises(InputError):
        parse_cuda(bad, "--nvcc")


def tree(tmp_path, shape="b_2021_cuda_home"):
    dst = tmp_path / "apex"
    shutil.copytree(SHAPES / shape, dst)
    return dst


def test_patch_tree_dry_run_then_apply_then_idempotent(tmp_path):
    src = tree(tmp_path)
    before = (src / "setup.py").read_text()
    dry = patch_tree(src, "11.4", "11.3", apply=False)
    assert dry.decision == "patched" and dry.diff.startswith("--- a/setup.py") and not dry.applied
    assert (src / "setup.py").read_text() == before
    done = patch_tree(src, "11.4", "11.3", apply=True)
    assert done.applied and done.diff == dry.diff and done.digest == dry.digest
    assert (src / "setup.py").read_text() != before
    again = patch_tree(src, "11.4", "11.3", apply=True)
    assert again.decision == "patched" and again.status == "already-applied"
    assert not again.applied and again.diff == ""


def test_patch_tree_refuses_major_without_touching(tmp_path):
    src = tree(tmp_path)
    before = (src / "setup.py").read_text()
    rep = patch_tree(src, "10.2", "11.1", apply=True)
    assert rep.decision == "refused" and rep.fix and (src / "setup.py").read_text() == before


def test_patch_tree_warning_only_is_unchanged(tmp_path):
    rep = patch_tree(tree(tmp_path, "e_2019_warning"), "11.4", "11.3", apply=True)
    assert rep.decision == "unchanged" and "warning" in rep.reason and rep.diff == ""


def test_patch_tree_unknown_shape_is_refused_with_fix(tmp_path):
    rep = patch_tree(tree(tmp_path, "unknown_shape"), "11.4", "11.3", apply=True)
    assert rep.decision == "refused" and "replace" in rep.fix


def test_patch_tree_apex_before_the_check_is_unchanged(tmp_path):
    src = tmp_path / "apex"
    (src / "apex").mkdir(parents=True)
    (src / "setup.py").write_text("from setuptools import setup\nsetup(name='apex')\n")
    rep = patch_tree(src, "11.4", "11.3")
    assert rep.decision == "unchanged" and "predates" in rep.reason


def test_patch_tree_bad_inputs(tmp_path):
    with pytest.raises(InputError, match="no setup.py"):
        patch_tree(tmp_path, "11.4", "11.3")
    with pytest.raises(InputError, match="not an Apex tree"):
        patch_tree(SHAPES / "not_apex", "11.4", "11.3")
