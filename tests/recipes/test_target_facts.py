"""Every fact of a shipped target profile names its source (issue 36).

A profile's OS, glibc, GPUs, CUDA toolkit, driver and Python (``FACT_FIELDS``) come from the
guide's own cluster files (a VM image in a cluster template, a container image in a Dockerfile
or a pod spec), the release notes of that image, or a captured node: each fact the profile sets
names where it was read in ``fact_sources`` (``local`` takes everything from live facts and
sets none). Where a git mirror of the guide is here (``ENVBUILD_GIT_MIRROR``), the image each
profile names is checked against the guide's file; elsewhere that check skips, saying so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envbuild.catalog import digest
from envbuild.gitsrc import mirror_path
from envbuild.targets import load_target, target_names
from envbuild.targets.schema import FACT_FIELDS, Target

PROFILES = [n for n in target_names() if not load_target(n).from_facts]


def test_the_guides_profiles_are_checked():
    assert {"azure-nd96", "polaris", "slurm", "rtx4090-pod"} <= set(PROFILES)


@pytest.mark.parametrize("name", PROFILES)
def test_every_fact_a_profile_sets_has_a_source(name):
    target = load_target(name)
    missing = [f for f in FACT_FIELDS if target.fact(f) is not None and f not in target.fact_sources]
    assert not missing, f"{name}: facts without a source in fact_sources: {missing}"
    assert target.image, f"{name}: names no image its facts are those of"
    # a source for a fact the profile leaves open would cite nothing
    idle = [f for f in target.fact_sources if target.fact(f) is None]
    assert not idle, f"{name}: fact_sources for facts the profile leaves open: {idle}"


def test_unknown_or_empty_fact_sources_are_refused():
    data = load_target("slurm").model_dump(by_alias=True)
    with pytest.raises(ValueError, match="not a fact of a profile"):
        Target.model_validate({**data, "fact_sources": {"cuda.nvcc": "x"}})
    with pytest.raises(ValueError, match="no source for cuda.toolkit"):
        Target.model_validate({**data, "fact_sources": {"cuda.toolkit": " "}})


def test_sources_are_not_part_of_the_lock_digest():
    target = load_target("azure-nd96")
    bare = target.model_copy(update={"fact_sources": {}, "image": None})
    assert digest(bare) == digest(target)


def test_azure_profile_is_the_guides_ubuntu_1804_hpc_image():
    target = load_target("azure-nd96")
    assert target.image == "microsoft-dsvm:ubuntu-hpc:1804:18.04.2021120101"
    assert (target.platform.os_version, target.platform.glibc) == ("18.04", "2.27")
    assert (target.cuda.toolkit, target.cuda.driver) == ("11.4", "470.82.01")
    assert "inference" in target.fact_sources["cuda.driver"]


def _show(url: str, commit: str, path: str) -> str:
    root = os.environ.get("ENVBUILD_GIT_MIRROR")
    repo = mirror_path(url, root) if root and Path(root).is_dir() else None
    if repo is None:
        pytest.skip(f"no git mirror of {url} here (CI has no GitHub): set ENVBUILD_GIT_MIRROR "
                    "to check the profile's image against the guide's file")
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True, timeout=60).stdout


@pytest.mark.integration
@pytest.mark.parametrize("name,url,commit,path,line", [
    ("azure-nd96", "https://github.com/yosoyjay/cyclecloud-llm", "d8b78383006ae0ceee5d500e768905f6bf8a1f8b",
     "cyclecloud/cluster-specs/slurm/slurm.json", '"HPCImageName" : "{image}"'),
    ("slurm", "https://github.com/woojinsoh/Megatron-DeepSpeed-Slurm", "1b53975055fa7275c7c0786d98e180bafc5047ee",
     "README.md", "FROM {image}"),
    ("rtx4090-pod", "https://github.com/OpenSQZ/MegatronApp", "1bed2a7202162d6eb2725e9769632a682021a6fb",
     "README.md", "ContainerImage: {image}"),
])
def test_the_image_is_the_one_the_guides_cluster_file_names(name, url, commit, path, line):
    target = load_target(name)
    text = _show(url, commit, path)
    assert line.format(image=target.image) in text
    assert commit in target.fact_sources["image"]
    if name == "azure-nd96":
        assert '"HPCMachineType" : "Standard_ND96amsr_A100_v4"' in text
