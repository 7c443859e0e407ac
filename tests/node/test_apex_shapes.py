"""Run the synthetic Apex setup.py shapes before and after envbuild's patch, with a fake nvcc
that replays the nvcc -V output captured on a real node (only the release number changes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.node.textpatch import MARKER, neutralize_apex_cuda_check
from support.paths import DATA, FIXTURES, ROOT

SHAPES = DATA / "apex_shapes"
HARD = ["a_2019_fullpath", "b_2021_cuda_home", "c_ints_multiline", "c_tuple", "d_2022_version",
        "d_master_version"]
CAPTURE = "nodes/h100-ubuntu2404-cuda13/nvcc-version.txt"


def captured_nvcc() -> str:
    for base in (FIXTURES, ROOT.parent / "shared" / "fixtures", Path("/work/shared/fixtures")):
        if (base / CAPTURE).is_file():
            return (base / CAPTURE).read_text()
    pytest.skip("captured nvcc -V output not found")


def make_cuda_home(root: Path, version: str) -> Path:
    """A CUDA_HOME whose bin/nvcc prints the captured output with release ``version``."""
    text = captured_nvcc()
    assert "release 13.0, V13.0.88" in text
    text = re.sub(r"release \d+\.\d+, V\d+\.\d+", f"release {version}, V{version}", text)
    text = text.replace("cuda_13.0.r13.0", f"cuda_{version}.r{version}")
    home = root / f"cuda-{version}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\ncat <<'EOF'\n" + text + "EOF\n")
    nvcc.chmod(0o755)
    return home


def run_setup(tree: Path, cuda_home: Path, torch_cuda: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_HOME": str(cuda_home), "TORCH_CUDA": torch_cuda, "APEX_CUDA_EXT": "1"}
    return subprocess.run([sys.executable, "setup.py", "--cuda_ext"], cwd=tree, env=env,
                          capture_output=True, text=True)


def copy_shape(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(SHAPES / name, dst)
    return dst


def patch_in_place(tree: Path) -> str:
    setup = tree / "setup.py"
    status, new, detail = neutralize_apex_cuda_check(setup.read_text())
    setup.write_text(new)
    return status


@pytest.mark.parametrize("shape", HARD)
def test_minor_mismatch_fails_before_and_builds_after(tmp_path, shape):
    tree = copy_shape(tmp_path, shape)
    cuda = make_cuda_home(tmp_path, "11.4")
    before = run_setup(tree, cuda, "11.3")
    assert before.returncode != 0 and "RuntimeError" in before.stderr
    assert patch_in_place(tree) == "applied"
    after = run_setup(tree, cuda, "11.3")
    assert after.returncode == 0, after.stderr
    assert "CHECK-PASSED" in after.stdout
    assert MARKER in (tree / "setup.py").read_text()


@pytest.mark.parametrize("shape", HARD)
def test_major_mismatch_still_raises_after_patch(tmp_path, shape):
    tree = copy_shape(tmp_path, shape)
    assert patch_in_place(tree) == "applied"
    out = run_setup(tree, make_cuda_home(tmp_path, "10.2"), "11.1")
    assert out.returncode != 0 and "RuntimeError" in out.stderr


@pytest.mark.parametrize("shape", HARD)
def test_equal_versions_pass_before_and_after(tmp_path, shape):
    tree = copy_shape(tmp_path, shape)
    cuda = make_cuda_home(tmp_path, "12.1")
    assert run_setup(tree, cuda, "12.1").returncode == 0
    patch_in_place(tree)
    assert run_setup(tree, cuda, "12.1").returncode == 0


@pytest.mark.parametrize("shape", HARD)
def test_patch_is_idempotent(tmp_path, shape):
    text = (SHAPES / shape / "setup.py").read_text()
    status, once, _ = neutralize_apex_cuda_check(text)
    status2, twice, detail = neutralize_apex_cuda_check(once)
    assert (status, status2) == ("applied", "already-applied")
    assert twice == once


def test_warning_only_shape_needs_nothing_and_runs(tmp_path):
    tree = copy_shape(tmp_path, "e_2019_warning")
    text = (tree / "setup.py").read_text()
    status, new, detail = neutralize_apex_cuda_check(text)
    assert status == "not-needed" and new == text and "warning" in detail
    out = run_setup(tree, make_cuda_home(tmp_path, "11.4"), "11.3")
    assert out.returncode == 0 and "Warning" in out.stdout


def test_unknown_shape_is_reported_not_silently_skipped():
    text = (SHAPES / "unknown_shape" / "setup.py").read_text()
    status, new, detail = neutralize_apex_cuda_check(text)
    assert status == "unrecognized" and new == text
    assert "same_cuda" in detail


def test_other_project_is_unrecognized():
    text = (SHAPES / "not_apex" / "setup.py").read_text()
    status, _, detail = neutralize_apex_cuda_check(text)
    assert status == "unrecognized" and "not an Apex setup.py" in detail


def test_unparsable_setup_is_unrecognized():
    status, _, detail = neutralize_apex_cuda_check("def check_cuda_torch_binary_vs_bare_metal(x):\nif\n")
    assert status == "unrecognized" and "does not parse" in detail


def test_published_azure_sed_is_a_noop_on_the_fullpath_shape(tmp_path):
    """The Azure doc's sed only matches the call written as (CUDA_HOME)."""
    sed = shutil.which("sed")
    if sed is None:
        pytest.skip("sed not installed")
    cuda = make_cuda_home(tmp_path, "11.4")
    results = {}
    for shape in ("a_2019_fullpath", "b_2021_cuda_home"):
        tree = copy_shape(tmp_path, shape)
        before = (tree / "setup.py").read_text()
        subprocess.run([sed, "-i", "s/check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)//g", "setup.py"],
                       cwd=tree, check=True)
        results[shape] = ((tree / "setup.py").read_text() == before, run_setup(tree, cuda, "11.3").returncode)
    assert results["a_2019_fullpath"][0] is True  # file unchanged
    assert results["a_2019_fullpath"][1] != 0  # and the build still refuses
    assert results["b_2021_cuda_home"][0] is False and results["b_2021_cuda_home"][1] == 0


def test_after_azure_sed_envbuild_reports_the_check_is_gone(tmp_path):
    tree = copy_shape(tmp_path, "b_2021_cuda_home")
    text = (tree / "setup.py").read_text().replace("check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)", "")
    status, _, detail = neutralize_apex_cuda_check(text)
    assert status == "not-needed" and "never called" in detail


def test_old_azure_if_false_sed_is_recognized():
    text = (SHAPES / "b_2021_cuda_home" / "setup.py").read_text().replace(
        "(bare_metal_major != torch_binary_major) or (bare_metal_minor != torch_binary_minor)", "False")
    status, _, detail = neutralize_apex_cuda_check(text)
    assert status == "not-needed" and "if False" in detail
