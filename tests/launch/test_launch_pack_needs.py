"""``launch --packed`` refuses a pack that lacks what the launch reads, before anything is
rendered or submitted, naming it (issue 53): a prefix provisioned with ``--no-smoke`` has no
smoke scripts (cpu-reference's benchmark is ``python gpt.py`` in their folder), and a pack
without the checkout a benchmark runs in cannot run it. What a pack holds is read from its
manifest's step markers (``envbuild.bundle.envpack``)."""

from __future__ import annotations

import pytest

from envbuild.bundle import envpack
from envbuild.errors import InputError
from envbuild.facts.profile import from_target
from envbuild.launch import LaunchOptions
from envbuild.launch.job import build_job
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.clirun import envbuild


def provisioned(prefix, steps: list[str]):
    """A prefix as a provision leaves it, with the markers of ``steps`` (what pack reads)."""
    (prefix / ".envbuild" / "state").mkdir(parents=True)
    (prefix / ".envbuild" / "env.sh").write_text("export X=1\n")
    for step in steps:
        (prefix / ".envbuild" / "state" / f"{step}.done").write_text("0\n")
    return prefix


def test_a_pack_provisioned_without_the_smoke_is_refused_before_submitting(tmp_path) -> None:
    steps = ["preflight", "environment", "pip-tooling", "pip:torch", "pip:packages", "env-file", "import-check"]
    prefix = provisioned(tmp_path / "env", steps)  # provision --no-smoke: every step but the smoke
    assert envbuild("pack", "--prefix", str(prefix), "-o", str(tmp_path / "env.tar.gz")).returncode == 0
    argv = ["launch", "cpu-reference", "-t", "local", "--scheduler", "slurm", "--prefix", str(prefix),
            "--packed", str(tmp_path / "env.tar.gz"), "-o", str(tmp_path / "job.sbatch")]
    r = envbuild(*argv, "--submit", "--timeout", "5", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "lacks what this launch reads: envbuild's smoke scripts (gpt.py, collective.py)" in r.stderr
    assert "(step smoke)" in r.stderr and "without --no-smoke" in r.stderr and "nothing was submitted" in r.stderr
    assert not (tmp_path / "job.sbatch").exists()
    # the same prefix with the smoke's marker packs into one the launch takes
    (prefix / ".envbuild" / "state" / "smoke.done").write_text("0\n")
    assert envbuild("pack", "--prefix", str(prefix), "-o", str(tmp_path / "env.tar.gz")).returncode == 0
    ok = envbuild(*argv, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "sbcast" in (tmp_path / "job.sbatch").read_text()


def test_a_pack_without_the_checkout_the_benchmark_runs_in_is_refused(tmp_path) -> None:
    rec, tgt = load_recipe("alpa-megatron"), load_target("slurm")
    prefix = tmp_path / "env"
    plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=str(prefix), host="slurm")).plan
    assert "git:alpa" in {s.id for s in plan.steps}
    markers = {s.id: "0" for s in plan.steps if s.id != "git:alpa"}
    packed = envpack.PackedEnv("/x.tar.gz", "0" * 64, 1, str(prefix), steps=markers)
    with pytest.raises(InputError, match=r"the checkout of alpa \(.*/src/alpa\) \(step git:alpa\)"):
        build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", variant="8gpu", gpus_per_node=8, packed=packed))
    # a replaced command reads no checkout: the same pack serves it
    job = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", variant="8gpu", gpus_per_node=8,
                                                  packed=packed, command_override="true"))
    assert job.packed == packed
    with_it = envpack.PackedEnv("/x.tar.gz", "0" * 64, 1, str(prefix), steps={**markers, "git:alpa": "0"})
    assert build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", variant="8gpu", gpus_per_node=8,
                                                   packed=with_it)).packed == with_it
