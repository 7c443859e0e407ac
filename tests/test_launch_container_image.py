"""The image a Slurm job runs (pyxis ``--container-image``) is the file the provision's
image-import step wrote (``<prefix>/envbuild-<recipe>-<target>.sqsh``), not a name relative to
the job's folder; without an import step (the image plan of a launch with no provisioned run)
the name stays as before, and --container-image still wins."""

from __future__ import annotations

from envbuild.launch import render_job
from envbuild.launch.job import LaunchOptions, build_job, default_image
from test_container_plan import _plan


def test_sbatch_runs_the_imported_sqsh_of_the_node_plan() -> None:
    rec, tgt, res = _plan("megatron-deepspeed-slurm", "slurm", {"podman": "4.9.3", "enroot": "3.5.0"})
    plan = res.plan
    path = plan.step("image-import").params.path
    assert path.startswith(plan.prefix + "/") and path.endswith(default_image(rec.name, tgt.name, "slurm"))
    job = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm"))
    assert job.container_image == path
    assert f"--container-image={path}" in render_job(job).text
    given = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", container_image="/srv/other.sqsh"))
    assert given.container_image == "/srv/other.sqsh"


def test_without_an_import_step_the_default_name_is_kept() -> None:
    rec, tgt, res = _plan("megatron-deepspeed-slurm", "slurm", {"podman": "4.9.3", "enroot": "3.5.0"})
    plan = res.plan.model_copy(update={"steps": [s for s in res.plan.steps if s.kind != "image_import"]})
    job = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm"))
    assert job.container_image == default_image(rec.name, tgt.name, "slurm")
