"""The image a Slurm job runs (pyxis ``--container-image``) is the file the provision's
image-import step wrote (``<prefix>/envbuild-<recipe>-<target>.sqsh``), not a name relative to
the job's folder; without an import step (the image plan of a launch with no provisioned run)
it is the same path in the plan's prefix, and --container-image still wins. Every name passed
to pyxis is read by pyxis's own rule (envbuild.launch.pyxis)."""

from __future__ import annotations

import re

import pytest

from envbuild.errors import InputError
from envbuild.launch import pyxis, render_job
from envbuild.launch.job import LaunchOptions, build_job, default_image
from envbuild.recipes import all_recipes
from envbuild.targets import load_target
from support.containerplan import engine_plan


def test_sbatch_runs_the_imported_sqsh_of_the_node_plan() -> None:
    rec, tgt, res = engine_plan("megatron-deepspeed-slurm", "slurm", {"podman": "4.9.3", "enroot": "3.5.0"})
    plan = res.plan
    path = plan.step("image-import").params.path
    assert path.startswith(plan.prefix + "/") and path == default_image(rec.name, tgt.name, "slurm", plan.prefix)
    job = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm"))
    assert job.container_image == path
    assert f"--container-image={path}" in render_job(job).text
    given = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", container_image="/srv/other.sqsh"))
    assert given.container_image == "/srv/other.sqsh"


def test_without_an_import_step_the_image_is_the_path_in_the_prefix() -> None:
    rec, tgt, res = engine_plan("megatron-deepspeed-slurm", "slurm", {"podman": "4.9.3", "enroot": "3.5.0"})
    plan = res.plan.model_copy(update={"steps": [s for s in res.plan.steps if s is not res.plan.image_import()]})
    job = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm"))
    assert job.container_image == default_image(rec.name, tgt.name, "slurm", plan.prefix)
    assert job.container_image == res.plan.step("image-import").params.path  # the one provision imports
    assert pyxis.is_squashfs_path(job.container_image)


def test_every_rendered_sbatch_names_a_file_pyxis_reads_as_a_file() -> None:
    """pyxis's own rule (a name starting with '.' or '/' is a squashfs file, anything else is
    pulled as docker://NAME) applied to the --container-image of every shipped recipe's sbatch."""
    checked = 0
    for rec in all_recipes():
        for target in rec.targets:
            tgt = load_target(target)
            if tgt.scheduler != "slurm":
                continue
            plan = engine_plan(rec.name, target, {"podman": "4.9.3", "enroot": "3.5.0"})[2].plan
            text = render_job(build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm"))).text
            for image in re.findall(r"--container-image[= ](\S+)", text):
                checked += 1
                assert pyxis.image_problem(image) is None, (rec.name, image)
                assert not image.endswith(".sqsh") or pyxis.is_squashfs_path(image), (rec.name, image)
    assert checked >= 1


def test_a_bare_sqsh_name_is_refused_with_the_path_to_give() -> None:
    rec, tgt, res = engine_plan("megatron-deepspeed-slurm", "slurm", {"podman": "4.9.3", "enroot": "3.5.0"})
    with pytest.raises(InputError) as err:
        build_job(rec, tgt, res.plan, LaunchOptions(scheduler="slurm", container_image="mine.sqsh"))
    assert "docker://mine.sqsh" in err.value.message and "--image ./mine.sqsh" in err.value.hint
    ok = build_job(rec, tgt, res.plan, LaunchOptions(scheduler="slurm", container_image="nvcr.io#nvidia/pytorch:22.02-py3"))
    assert ok.container_image == "nvcr.io#nvidia/pytorch:22.02-py3"  # a registry image stays a URI
