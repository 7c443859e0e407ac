"""The parts of the image proof (envbuild.testbed.imageproof) that decide what is built and how
the build reaches its sources: the cut image plan, the mirror mounts, the stand-in's apt
repository. The build itself is tests/testbed/test_image_proof.py (needs a git mirror)."""

from __future__ import annotations

import subprocess

from envbuild.lock import lock_path, read_lock
from envbuild.recipes import load_recipe
from envbuild.render import dockerfile
from envbuild.plan.image import image_plan
from envbuild.testbed.imageproof import MIRROR_IN_BUILD, cpu_image_plan, empty_deb, mirror_mounts
from envbuild.testbed.proofrecord import cpu_target


def _cut(name: str):
    recipe = load_recipe(name)
    target = cpu_target(recipe)
    return cpu_image_plan(image_plan(recipe, target, read_lock(lock_path(name, target.name))), recipe)


def test_megatronapps_extension_build_is_left_out_and_named_with_what_it_makes() -> None:
    cut = _cut("megatronapp")
    kinds = [s.id for s in cut.image.plan.steps]
    assert "build:megatronapp" not in kinds and "git:megatronapp" in kinds
    assert [u.what for u in cut.left] == ["build:megatronapp"]
    assert "rdma" in cut.left[0].why or "nvcc" in cut.left[0].why
    assert cut.unbuilt and all("build:megatronapp" in why for why in cut.unbuilt.values())
    text = dockerfile.render(cut.image).files["Dockerfile"]
    assert "FROM nvcr.io/nvidia/pytorch:23.04-py3" in text  # the stand-in takes the image's name
    assert "# step build:megatronapp" not in text and "# step patch:cxx11-abi-from-torch" in text


def test_a_recipe_without_gpu_only_steps_keeps_its_whole_image_plan() -> None:
    recipe = load_recipe("megatron-deepspeed-slurm")
    target = cpu_target(recipe)
    ip = image_plan(recipe, target, read_lock(lock_path(recipe.name, target.name)))
    cut = cpu_image_plan(ip, recipe)
    assert cut.left == [] and cut.unbuilt == {}
    assert dockerfile.render(cut.image).files == dockerfile.render(ip).files


def test_the_builds_git_clone_reads_the_mirror_through_insteadof(tmp_path) -> None:
    """The gitconfig the build mounts rewrites the Dockerfile's GitHub URL to the mounted
    repository: checked with git itself, the mount's target standing for the repository."""
    repo = tmp_path / "mirror" / "acme" / "tool.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    args = mirror_mounts(["https://github.com/acme/tool"], str(tmp_path / "mirror"), tmp_path)
    inside = f"{MIRROR_IN_BUILD}/acme/tool.git"
    assert args[:2] == ["-v", f"{repo.resolve()}:{inside}:ro"]
    assert args[-2:] == ["-v", f"{tmp_path / 'gitconfig'}:/etc/gitconfig:ro"]
    out = subprocess.run(["git", "ls-remote", "--get-url", "https://github.com/acme/tool"],
                         env={"GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"), "GIT_CONFIG_NOSYSTEM": "1",
                              "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == inside


def test_a_source_the_mirror_lacks_is_named(tmp_path) -> None:
    import pytest

    with pytest.raises(LookupError, match="acme/absent"):
        mirror_mounts(["https://github.com/acme/absent"], str(tmp_path), tmp_path)


def test_the_stand_ins_apt_repository_lists_an_installable_empty_package(tmp_path) -> None:
    empty_deb(tmp_path / "apt", "python3.8-venv", "0envbuild1", "stand-in")
    deb = tmp_path / "apt" / "python3.8-venv_0envbuild1_all.deb"
    info = subprocess.run(["dpkg-deb", "--field", str(deb), "Package", "Version", "Depends"],
                          capture_output=True, text=True, check=True).stdout
    assert "Package: python3.8-venv" in info and "Depends" not in info
    assert subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True,
                          check=True).stdout.count("\n") == 1  # only ./
    packages = (tmp_path / "apt" / "Packages").read_text()
    assert f"Filename: ./{deb.name}" in packages and f"Size: {deb.stat().st_size}" in packages


def test_a_url_that_could_write_its_own_gitconfig_line_is_refused(tmp_path) -> None:
    import pytest

    for url in ['https://github.com/acme/tool"\n[core]\n\tsshCommand = touch /x', "https://github.com/a/b c"]:
        with pytest.raises(ValueError, match="not a plain URL"):
            mirror_mounts([url], str(tmp_path), tmp_path)
    assert not (tmp_path / "gitconfig").exists()
