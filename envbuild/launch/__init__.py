"""Launch a recipe's published run through a scheduler: Slurm, PBS, Kubernetes, or locally.

Pure renderers turn (recipe, target, plan, options) into the files a scheduler takes; one
executor module (``envbuild.launch.submit``) submits them, follows the job and collects its
output into a run directory::

    recipe + target + plan ──> job.build_job ──> Job ──┬─> slurm.render  (sbatch script)
       (envbuild.plan.resolve,   (the recipe's run:    ├─> pbs.render    (qsub script)
        or a run's plan.json)     how each command     ├─> k8s.render    (Indexed Job + Service)
                                  runs on nodes)       └─> local.render  (bash script)

    >>> from envbuild.launch import LaunchOptions, render_launch
    >>> r = render_launch(recipe, target, plan, LaunchOptions(scheduler="slurm"))
    >>> r.filename, r.text.splitlines()[0]
    ('envbuild-megatron-deepspeed-slurm.sbatch', '#!/bin/bash')

The environment's activation is the plan's: each task sources the env file the plan's
``env-file`` step writes (after ``module load`` for a module's Python); no install syntax
is spelled here. Every value is shell-quoted; output goes to files the launcher collects.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.launch.job import Job, LaunchOptions, build_job

EXTENSIONS = {"slurm": "sbatch", "pbs": "pbs", "k8s": "yaml", "local": "sh"}

__all__ = ["Job", "LaunchOptions", "Rendered", "build_job", "render_job", "render_launch"]


@dataclass(frozen=True)
class Rendered:
    """One launch file: ``filename`` (``<job name>.<sbatch|pbs|yaml|sh>``) and its text."""

    job: Job
    filename: str
    text: str


def render_job(job: Job) -> Rendered:
    from envbuild.launch import k8s, local, pbs, slurm

    renderer = {"slurm": slurm.render, "pbs": pbs.render, "k8s": k8s.render, "local": local.render}[job.scheduler]
    return Rendered(job=job, filename=f"{job.name}.{EXTENSIONS[job.scheduler]}", text=renderer(job))


def render_launch(recipe, target, plan, options: LaunchOptions) -> Rendered:
    """The launch file of ``recipe`` on ``target`` for ``plan`` (pure)."""
    return render_job(build_job(recipe, target, plan, options))
