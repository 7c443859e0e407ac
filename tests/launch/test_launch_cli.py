"""``envbuild launch``: rendering to a file, refusals, a local run parsed with the recipe's own
parser, and no submission to nodes that drifted from their provision run."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from envbuild.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_render_to_file(tmp_path, capsys) -> None:
    out = tmp_path / "mnmg.sbatch"
    assert main(["launch", "megatron-deepspeed-slurm", "-t", "slurm", "--scheduler", "slurm",
                 "--variant", "multi-node", "-o", str(out), "--time", "02:00:00", "--partition", "gpu"]) == 0
    text = out.read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --time=02:00:00" in text and "#SBATCH --partition=gpu" in text
    # the enroot import in the plan's prefix: a path, which pyxis reads as a file
    assert "--container-image=/opt/envbuild/megatron-deepspeed-slurm/envbuild-megatron-deepspeed-slurm-slurm.sqsh" in text
    assert stat.S_IMODE(out.stat().st_mode) & 0o100
    # the image's extension holds the pods' InfiniBand addresses: the plan needs their facts
    from envbuild.targets import load_target
    from support.ib_inventory import profile_facts

    facts = tmp_path / "pods.json"
    facts.write_text(profile_facts(load_target("rtx4090-pod")).to_json())
    assert main(["launch", "megatronapp", "-t", "rtx4090-pod", "--scheduler", "k8s", "--variant", "two-pods",
                 "--facts", str(facts), "--image", "registry.example.org/m:1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert res["nodes"] == 2 and res["name"] == "envbuild-megatronapp.yaml" and "kind: Job" in res["text"]
    assert "image: registry.example.org/m:1" in res["text"]
    assert main(["launch", "megatronapp", "-t", "rtx4090-pod", "--scheduler", "k8s", "--variant", "two-pods",
                 "--image", "registry.example.org/m:1", "--k8s-workload", "jobset", "--json"]) == 0
    said = capsys.readouterr().out
    res = json.loads(said[said.index("{"):])
    assert "kind: JobSet" in res["text"] and "kind: Service" not in res["text"]


@pytest.mark.parametrize("args,words", [
    (["polaris-megatron-deepspeed", "-t", "polaris", "--scheduler", "pbs", "--submit"], "render-only"),
    (["megatronapp", "-t", "rtx4090-pod", "--scheduler", "k8s", "--submit"], "render-only"),
    (["alpa-megatron", "-t", "slurm", "--scheduler", "slurm", "--variant", "nope"], "no variant 'nope'"),
    (["opt-175b-azure", "-t", "azure-nd96", "--scheduler", "pbs"], "runs its jobs through slurm"),
    (["alpa-megatron", "-t", "slurm", "--scheduler", "local", "--nodes", "2"], "runs on 1 node"),
    (["alpa-megatron", "-t", "slurm", "--scheduler", "slurm", "--k8s-workload", "jobset"], "Kubernetes option"),
])
def test_bad_input_is_exit_2(args, words, capsys) -> None:
    assert main(["launch", *args]) == 2
    assert words in capsys.readouterr().err


def test_local_run_is_parsed_with_the_recipes_parser(tmp_path, home, capsys) -> None:
    """cpu-reference's own benchmark (envbuild's tiny GPT smoke, parser envbuild-smoke) run by
    the local launcher in a stand-in environment (a venv seeing this interpreter's CPU torch,
    with the plan's env file and smoke scripts)."""
    from envbuild.inputs import node_facts
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import resolve
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target
    from envbuild.testbed.planenv import materialize

    rec, tgt = load_recipe("cpu-reference"), load_target("local")
    prefix = tmp_path / "env"
    plan = resolve(rec, tgt, node_facts(tgt)[0], None, PlanOptions(prefix=str(prefix))).plan
    materialize(plan, tmp_path / "files", rec)
    rc = main(["launch", "cpu-reference", "-t", "local", "--scheduler", "local", "--prefix", str(prefix),
               "--submit", "--json", "--timeout", "300"])
    captured = capsys.readouterr()
    # the run completed and cpu-reference's floor (mfu of the measured matmul peak) judged it
    res = json.loads(captured.out)
    native = res["results"]["native"]
    verdict = native["verdict"]
    assert native["parser"] == "envbuild-smoke" and verdict["metric"] == "mfu" and verdict["compared"]["value"] == 0.10
    assert verdict["verdict"] == ("PASS" if verdict["value"] >= 0.10 else "FAIL")
    assert rc == (0 if verdict["verdict"] == "PASS" else 1), captured.err
    assert res["status"] == verdict["verdict"] and res["passed"] is (verdict["verdict"] == "PASS")
    assert native["metrics"]["tokens_per_second"] > 0
    run = Path(res["run"])
    assert (home / "runs" / "latest").resolve() == run and res["latest"] is True  # a measurement: evidence
    # the job ran on this machine, named as itself (no provision run calls it "local")
    here = socket.gethostname()
    assert res["node"] == res["node_dir"] == here and res["nodes"] == [here]
    assert json.loads((run / "nodes" / here / "smoke.json").read_text())["native"]["ran"] is True
    assert json.loads((run / "run.json").read_text())["hosts"] == [here]

    # a job that fails leaves runs/latest where it was: `envbuild verify` and `report` go on
    # reading the run that carries evidence
    rc = main(["launch", "cpu-reference", "-t", "local", "--scheduler", "local", "--prefix", str(prefix),
               "--submit", "--json", "--command-override", "exit 3"])
    captured = capsys.readouterr()
    failed = json.loads(captured.out)
    assert rc == 1 and failed["job"]["state"] == "FAILED" and failed["latest"] is False
    assert "runs/latest not moved: the job did not complete" in captured.err
    assert (home / "runs" / "latest").resolve() == run


@pytest.fixture
def provisioned(tmp_path, home):
    """A one-node provision run of this machine (a real venv, git tree, patch and .so)."""
    from support.observed import make_env, observe_local

    lock, plan = make_env(tmp_path / "node", {"six": "1.16.0"})
    run = home / "runs" / "20261122-100000-cpu-reference-local"
    node = run / "nodes" / "local"
    node.mkdir(parents=True)
    (node / "plan.json").write_text(json.dumps(plan))
    (node / "observed.json").write_text(json.dumps(observe_local(plan).model_dump(by_alias=True)))
    (run / "lock.lock").write_text(json.dumps(lock))
    (run / "run.json").write_text(json.dumps({"schema": "envbuild.run/1", "run_id": run.name,
                                              "recipe": "cpu-reference", "target": "local", "status": "ok",
                                              "hosts": ["local"], "options": {}}))
    return run, plan


def test_verified_run_is_submitted_and_drifted_nodes_are_refused(provisioned, home, capsys) -> None:
    from support.observed import build_so

    run, plan = provisioned
    args = ["launch", "cpu-reference", "-t", "local", "--scheduler", "local", "--submit", "--json",
            "--command-override", "echo verified-then-ran"]
    # the newest provision run of the recipe is found and verified clean, then the job runs; it
    # exits 1 because the replaced command prints no mfu for the recipe's parser
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "the job finished but its result does not pass" in captured.err
    res = json.loads(captured.out)
    assert res["job"]["state"] == "COMPLETED"
    assert "verified-then-ran" in Path(res["job"]["stdout_path"]).read_text()
    assert "mfu' not found" in res["results"]["native"]["verdict"]["reason"]
    launch = json.loads((Path(res["run"]) / "launch.json").read_text())
    assert launch["provisioned_run"] == str(run) and launch["verified"][0]["status"] == "clean"
    assert (Path(res["run"]) / "nodes" / "local" / "observed.json").exists()  # the evidence comes along
    runs_before = sorted(p.name for p in (home / "runs").iterdir())

    build_so(Path(plan["steps"][0]["params"]["dest"]) / "megatron" / "fused_kernels.so", 43)
    assert main([*args, "--run", str(run)]) == 1
    err = capsys.readouterr().err
    assert "not submitting: drift on local" in err
    assert sorted(p.name for p in (home / "runs").iterdir()) == runs_before  # nothing ran
    assert os.path.exists(run / "nodes" / "local" / "plan.json")


def _no_smoke_run(home: Path, gpus: int) -> Path:
    """A run of opt-175b-azure-h100 as ``provision --no-smoke`` leaves it on the captured H100 node
    with ``gpus`` GPUs: the facts as gathered, the preflight verdict without the benchmark (the
    benchmark's two GPUs a warning on one), the plan without its smoke, run.json's options."""
    from envbuild.facts.assemble import assemble
    from envbuild.facts.script import split_sections
    from envbuild.lock.check import check_lock_file
    from envbuild.lock.location import SHIPPED_LOCKDIR
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import check_facts, resolve
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target
    from support.h100 import CAPTURE

    rec, tgt = load_recipe("opt-175b-azure-h100"), load_target("h100-venv")
    facts = assemble(split_sections(CAPTURE.read_text()), "local")
    facts = facts.model_copy(update={"gpus": [facts.gpus[0]] * gpus})
    lock = check_lock_file(SHIPPED_LOCKDIR / rec.name / "h100-venv.lock", rec, tgt)
    _, verdict = check_facts(rec, tgt, facts, smoke=False)
    plan = resolve(rec, tgt, facts, lock, PlanOptions(prefix=str(home / "env"), smoke=False)).plan
    run = home / "runs" / f"20261130-100000-{rec.name}-h100-venv"
    node = run / "nodes" / "local"
    node.mkdir(parents=True)
    (node / "facts.json").write_text(facts.model_dump_json(by_alias=True))
    (node / "preflight.json").write_text(verdict.to_json())
    (node / "plan.json").write_text(plan.model_dump_json(by_alias=True))
    (run / "run.json").write_text(json.dumps({"schema": "envbuild.run/2", "run_id": run.name, "recipe": rec.name,
                                              "target": "h100-venv", "status": "ok", "hosts": ["local"],
                                              "options": {"smoke": False}}))
    return run


def test_a_run_provisioned_without_its_benchmark_on_too_few_gpus_is_not_launched(home, capsys) -> None:
    """Run 22's install: opt-175b-azure-h100 provisioned with --no-smoke on one GPU, its preflight
    FEASIBLE with too-few-gpus a warning. launch --submit runs the training command on the GPUs
    per node the job asks (TP 2: two): the run's nodes are held against it from their recorded
    facts, and the job is refused before anything is verified or submitted; a node whose facts
    were not recorded is refused too (its GPUs unknown)."""
    run = _no_smoke_run(home, gpus=1)
    recorded = json.loads((run / "nodes" / "local" / "preflight.json").read_text())
    assert recorded["feasible"] is True and [v["severity"] for v in recorded["violations"]
                                             if v["rule"] == "too-few-gpus"] == ["warning"]
    args = ["launch", "opt-175b-azure-h100", "-t", "h100-venv", "--scheduler", "local", "--submit"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert ("not submitting: the job runs opt-175b-azure-h100 on 2 GPU(s) per node, and the nodes of run "
            f"{run.name} (provisioned with --no-smoke: judged without the benchmark) have fewer: local has 1") in err
    assert "hint: provision nodes with enough GPUs" in err
    assert sorted(p.name for p in (home / "runs").iterdir()) == [run.name]  # no job run made
    # the same run named with --run, and with a run.json that does not record the option: judged too
    (run / "run.json").write_text((run / "run.json").read_text().replace('{"smoke": false}', "{}"))
    assert main([*args, "--run", str(run)]) == 1
    err = capsys.readouterr().err
    assert "have fewer: local has 1" in err and "--no-smoke" not in err.split("hint:")[0]
    (run / "nodes" / "local" / "facts.json").unlink()
    assert main([*args, "--run", str(run)]) == 1
    assert "local: no facts recorded, its GPUs unknown" in capsys.readouterr().err


def test_a_run_without_its_benchmark_on_enough_gpus_goes_on_to_be_verified(home, capsys) -> None:
    """The benchmark's rows pass on two GPUs, and a job that replaces the training command does
    not run the benchmark: neither is refused by them (the launch goes on to verify the node,
    whose environment this machine does not hold)."""
    _no_smoke_run(home, gpus=2)
    args = ["launch", "opt-175b-azure-h100", "-t", "h100-venv", "--scheduler", "local", "--submit"]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "not submitting: could not verify local" in err and "have fewer" not in err
    one = _no_smoke_run(home / "one", gpus=1)
    for replaced in (["--smoke-only"], ["--command-override", "nvidia-smi -L"]):
        assert main([*args, "--run", str(one), *replaced]) == 3
        err = capsys.readouterr().err
        assert "not submitting: could not verify local" in err and "have fewer" not in err


def test_the_gpus_a_job_needs_follow_its_variant_and_gpus_per_node() -> None:
    """MegatronApp's benchmark needs 4 GPUs, its variant pp2-no-interleave 2: a node with 2 is held
    against the variant's count, not the benchmark's; with neither given, at least the benchmark's."""
    from envbuild.flows.launch import job_gpus
    from envbuild.launch import LaunchOptions
    from envbuild.recipes import load_recipe

    rec = load_recipe("megatronapp-h100")
    assert job_gpus(rec, 2, LaunchOptions(scheduler="local", variant="pp2-no-interleave")) == 2
    assert job_gpus(rec, 2, LaunchOptions(scheduler="local", gpus_per_node=2)) == 2
    assert job_gpus(rec, 1, LaunchOptions(scheduler="local")) == 4
    assert job_gpus(rec, 8, LaunchOptions(scheduler="local")) == 8
