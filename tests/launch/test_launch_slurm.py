"""The generated sbatch scripts of every Slurm recipe, submitted to a real Slurm cluster
(munge, slurmctld, 2 slurmd in network namespaces, 2 fake GPUs per node: the session fixture
``slurm_cluster``), their output collected into a run directory and parsed.

There are no GPUs here, so the training command of each recipe is REPLACED, explicitly and
visibly (``--smoke-only`` / ``--command-override``, written at the top of the script and
printed by the job): by envbuild's CPU smoke (an all-reduce over every rank of every node,
joined through torchrun's c10d rendezvous on the first node), by a replay of a captured
Megatron-DeepSpeed log (parsed with the recipe's own parser), or by a failing command.
The recipes' environments are stand-ins (``envbuild.testbed.planenv``): a venv seeing this
interpreter's CPU torch, with the plan's own env file and smoke scripts. Pyxis is not
installed on the test cluster, so the container recipe runs with ``--no-container``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.facts.profile import from_target
from envbuild.launch import LaunchOptions
from envbuild.launch import submit as sub
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.smoke.native import parse
from envbuild.targets import load_target
from envbuild.testbed.planenv import materialize
from support.paths import DATA

pytestmark = pytest.mark.integration
LOGS = DATA / "native_logs"


@pytest.fixture(scope="module")
def stand_ins(module_tmp):
    """``{recipe: (recipe, target, plan)}`` with each plan's stand-in environment built once."""
    root = module_tmp("launch-envs")
    out = {}
    for name, target in (("alpa-megatron", "slurm"), ("opt-175b-azure", "azure-nd96"),
                         ("megatron-deepspeed-slurm", "slurm")):
        rec, tgt = load_recipe(name), load_target(target)
        plan = resolve(rec, tgt, from_target(tgt), None,
                       PlanOptions(prefix=str(root / "envs" / name), host=target)).plan
        materialize(plan, root / f"files-{name}", rec)
        out[name] = (rec, tgt, plan)
    return out


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _launch(stand_ins, cluster, name, **kw):
    rec, tgt, plan = stand_ins[name]
    return sub.launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", **kw), argv=["pytest"],
                      env=cluster.env, timeout=120)


@pytest.mark.parametrize("name,kw", [
    # (Megatron-DeepSpeed multi-node, torchrun per node with its c10d rendezvous on node1, runs
    # through the CLI in test_cli_submit_on_slurm; torch starts in ~4 s here, so each job counts)
    # Alpa's 8-GPU variant across 2 nodes (per-node launch), smoke with 1 rank per node
    ("alpa-megatron", dict(variant="8gpu", nodes=2, smoke_only=True, gpus_per_node=1)),
    # opt-baselines' single node, the target's NCCL environment in the task
    ("opt-175b-azure", dict(smoke_only=True, gpus_per_node=1)),
])
def test_smoke_replaces_training_and_is_collected(stand_ins, slurm_cluster, home, name, kw) -> None:
    out = _launch(stand_ins, slurm_cluster, name, **kw)
    assert out.result.state == "COMPLETED", out.result.tail()
    coll = out.smoke.collective  # the job node's smoke.json, typed (envbuild.record.SmokeRecord)
    ranks = kw["gpus_per_node"] * (2 if kw.get("nodes") == 2 or kw.get("variant") == "multi-node" else 1)
    assert coll.ok is True and coll.world_size == ranks and coll.backend == "gloo"
    assert coll.max_busbw_gbps > 0 or ranks == 1
    native = out.smoke.native
    assert native.ran is False and native.reason.startswith("--smoke-only: the training command")
    assert "envbuild: --smoke-only" in out.result.stdout + out.result.stderr  # the job says so too
    smoke = json.loads((out.run_dir / "nodes" / out.node / "smoke.json").read_text())
    assert smoke == json.loads(json.dumps(out.smoke.as_written()))
    launch = json.loads((out.run_dir / "launch.json").read_text())
    assert launch["job"]["state"] == "COMPLETED" and launch["replaced"] == native.reason
    assert launch["status"] == out.status == "NOT JUDGED" and launch["passed"] is None
    script = (out.run_dir / "job" / out.rendered.filename).read_text()
    assert "# NOTE: --smoke-only: the training command" in script
    # each rank's import of torch, from the environment where it lies (a prefix every node reads)
    from envbuild.report import collect, render

    report = collect(out.run_dir)
    costs = [c for n in report.nodes for c in n.import_cost]
    assert [c.rank for c in costs] == list(range(ranks)) and not any(c.from_pack for c in costs)
    assert all(c.prefix.startswith(str(stand_ins[name][2].prefix)) and c.seconds > 0 and c.files_opened > 100
               for c in costs), costs
    assert "## Import cost" in render(report, "md") and "<h2>Import cost</h2>" in render(report, "html")
    if name == "opt-175b-azure":
        task = next((out.run_dir / "job").glob("*.task.sh")).read_text()
        assert "export NCCL_SOCKET_IFNAME=eth0" in task and "export UCX_NET_DEVICES=eth0" in task


def test_replayed_log_is_parsed_with_the_recipes_parser(stand_ins, slurm_cluster, home) -> None:
    """The training command replaced by a replay of a captured Megatron-DeepSpeed log: the
    collect path parses it with the recipe's own parser (megatron-deepspeed)."""
    log = LOGS / "megatron_deepspeed_slurm.log"
    out = _launch(stand_ins, slurm_cluster, "megatron-deepspeed-slurm", no_container=True, gpus_per_node=1,
                  command_override=f"cat {log}")
    assert out.result.state == "COMPLETED", out.result.tail()
    native = out.smoke.native
    assert native.parser == "megatron-deepspeed" and native.ran is True
    assert native.metrics["samples_per_second"] > 0
    # the replayed excerpt logs 4 of its 1000 iterations: whatever the throughput, a run that
    # stopped early is not a pass (envbuild.smoke.completion)
    assert native.verdict.verdict == "FAIL" and "4 of 1000" in native.verdict.reason
    assert not out.passed and out.status == "FAIL"
    assert native.replaced.startswith("--command-override")
    # sbatch wrote the task's output to --output=<job folder>/%x-%j.out, and that file is what
    # was read: the job name and id filled in, the parsed metrics those of its text
    script = (out.run_dir / "job" / out.rendered.filename).read_text()
    assert f"#SBATCH --output={out.run_dir / 'job'}/%x-%j.out" in script
    job_out = out.run_dir / "job" / f"envbuild-megatron-deepspeed-slurm-{out.result.job_id}.out"
    assert Path(out.result.stdout_path) == job_out and job_out.is_file()
    assert parse(native.parser, job_out.read_text()) == native.metrics


def test_failed_job_reports_state_and_tail(stand_ins, slurm_cluster, home) -> None:
    out = _launch(stand_ins, slurm_cluster, "alpa-megatron", gpus_per_node=1,
                  command_override="echo training started; echo CUDA error: no device >&2; exit 3")
    assert out.result.state == "FAILED" and out.result.exit_code == "3:0"  # the command's own status
    native = out.smoke.native
    assert native.error.startswith(f"job {out.result.job_id} FAILED")
    assert "CUDA error: no device" in native.tail and "training started" in native.tail
    run = json.loads((out.run_dir / "run.json").read_text())
    assert run["status"] == "failed" and run["job"]["state"] == "FAILED"
    assert not out.passed
    # once the controller forgets a job, its jobcomp/filetxt line says the same
    done = sub.jobcomp_record(out.result.job_id, {**os.environ, **slurm_cluster.env})
    assert done["JobState"] == "FAILED" and done["ExitCode"] == "3:0"


def test_a_sites_template_block_runs_in_the_job(stand_ins, slurm_cluster, home, tmp_path) -> None:
    """A site's slurm.sbatch.j2 over envbuild's (launch --templates): its environment block is
    in the batch script that Slurm runs, and every task sees what it exported."""
    from envbuild.render.sitetemplates import read_site

    (tmp_path / "slurm.sbatch.j2").write_text('{% extends "envbuild/slurm.sbatch.j2" %}'
                                              "{% block environment %}export SITE_MARK=from-the-site{% endblock %}")
    out = _launch(stand_ins, slurm_cluster, "alpa-megatron", variant="8gpu", nodes=2, gpus_per_node=1,
                  command_override='echo "site mark on $(hostname): $SITE_MARK"', templates=read_site(tmp_path))
    assert out.result.state == "COMPLETED", out.result.tail()
    text = Path(out.result.stdout_path).read_text()
    assert "site mark on node1: from-the-site" in text and "site mark on node2: from-the-site" in text


def test_cli_submit_on_slurm(stand_ins, slurm_cluster, home, monkeypatch, capsys) -> None:
    """``envbuild launch --submit``: sbatch through the cluster's clients, scontrol to follow,
    the result in a run directory that ``envbuild report`` reads (it says FAIL: the nodes were
    not provisioned, so their installed state is not verified)."""
    for k, v in slurm_cluster.env.items():
        monkeypatch.setenv(k, v)
    _, _, plan = stand_ins["megatron-deepspeed-slurm"]
    rc = main(["launch", "megatron-deepspeed-slurm", "-t", "slurm", "--scheduler", "slurm", "--variant",
               "multi-node", "--smoke-only", "--no-container", "--gpus-per-node", "1",
               "--prefix", plan.prefix, "--submit", "--json", "--timeout", "120"])
    captured = capsys.readouterr()
    # --smoke-only replaced the training: the all-reduce held, the recipe's figure was not
    # measured, so the job is NOT JUDGED (exit 5), never PASS
    assert rc == 5, captured.err
    res = json.loads(captured.out)
    assert res["status"] == "NOT JUDGED" and res["passed"] is None
    assert res["job"]["state"] == "COMPLETED" and res["results"]["collective"]["ok"]
    assert "NOT JUDGED" in captured.err and "--smoke-only" in captured.err
    assert "not verified before submitting" in captured.err
    assert main(["report", res["run"], "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any(r["kind"] == "unobserved" for r in report["verdict"]["reasons"])
    assert any(b["name"] == "collective.max_busbw_gbps" for n in report["nodes"] for b in n["benchmarks"])


def test_a_packed_environment_reaches_every_node_through_sbcast(slurm_cluster, home, tmp_path) -> None:
    """Build once, pack once: a stand-in environment made at a path that is each node's own disk
    (``cluster.node_local``: a tmpfs per node, empty on every node), packed by envbuild pack,
    then one job: sbcast sends the pack to both nodes through Slurm's tree, each node checks its
    sha256 and unpacks it at the prefix (a tar.zst, pack's default: tar -I zstd on the node), and
    the smoke runs from those copies on both nodes. A
    pack changed after its manifest was written is refused before submitting; a copy that
    differs on a node fails the job before any task runs."""
    from envbuild.bundle import envpack
    from envbuild.errors import InputError

    rec, tgt = load_recipe("alpa-megatron"), load_target("slurm")
    prefix = slurm_cluster.node_local / "envs" / "alpa-megatron"
    plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=str(prefix), host="slurm")).plan
    materialize(plan, tmp_path / "files", rec)  # on this machine; the nodes see an empty folder there
    packed = envpack.pack(prefix, tmp_path / "alpa.tar.zst")
    assert envpack.read(tmp_path / "alpa.tar.zst") == packed and packed.prefix == str(prefix)
    opts = dict(scheduler="slurm", variant="8gpu", nodes=2, smoke_only=True, gpus_per_node=1)
    out = sub.launch(rec, tgt, plan, LaunchOptions(**opts, packed=packed), argv=["pytest"],
                     env=slurm_cluster.env, timeout=180)
    assert out.result.state == "COMPLETED", out.result.tail()
    text = Path(out.result.stdout_path).read_text()
    for node in ("node1", "node2"):
        assert f"envbuild: {node} checked the pack (sha256 {packed.sha256[:16]}) and unpacked it at {prefix}" in text
    coll = out.smoke.collective
    assert coll.ok is True and coll.world_size == 2  # one rank per node, each from its own copy
    # the report: each rank imported torch from its node's own copy, unpacked from the pack
    from envbuild.report import collect, render

    report = collect(out.run_dir)
    costs = [c for n in report.nodes for c in n.import_cost]
    assert [(c.rank, c.from_pack, c.fs_type, c.shared) for c in costs] == [(0, True, "tmpfs", False),
                                                                          (1, True, "tmpfs", False)], costs
    assert {c.host for c in costs} == {"node1", "node2"} and all(c.files_opened > 100 for c in costs)
    assert "(unpacked from the pack)" in render(report, "md")

    # the pack changed after envbuild pack: refused on the controller, nothing submitted
    data = bytearray((tmp_path / "alpa.tar.zst").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "alpa.tar.zst").write_bytes(bytes(data))
    with pytest.raises(InputError, match="its sha256 differs from the one alpa.tar.zst.json recorded"):
        envpack.read(tmp_path / "alpa.tar.zst")
    # and if it reaches the nodes anyway (changed between the check and sbcast), they refuse it
    bad = sub.launch(rec, tgt, plan, LaunchOptions(**opts, packed=packed), argv=["pytest"],
                     env=slurm_cluster.env, timeout=180)
    assert bad.result.state == "FAILED", bad.result.tail()
    err = Path(bad.result.stderr_path).read_text()
    assert "the copy of the pack does not match its sha256" in err
    assert "checked the pack" not in Path(bad.result.stdout_path).read_text()  # no node unpacked it
    assert bad.smoke.collective.ok is False  # and no task ran: nothing measured


@pytest.mark.skipif(not shutil.which("mksquashfs") or not shutil.which("squashfuse"),
                    reason="squashfs-tools/squashfuse are not installed (.ci/apt-packages.txt installs them)")
def test_a_squashfs_image_is_mounted_on_every_node_not_unpacked(slurm_cluster, home, tmp_path) -> None:
    """The environment packed as a squashfs image (``.sqsh``): sbcast sends it to both nodes,
    each checks its copy's sha256, and each task mounts it read-only at the prefix with
    squashfuse (in the task's own step) and unmounts it when it exits. Both ranks import torch
    from the mount, a node-local file system, and the report says the prefix was mounted from
    the image."""
    from envbuild.bundle import envpack
    from envbuild.report import collect, render

    rec, tgt = load_recipe("alpa-megatron"), load_target("slurm")
    prefix = slurm_cluster.node_local / "envs" / "alpa-image"
    plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=str(prefix), host="slurm")).plan
    materialize(plan, tmp_path / "files", rec)
    packed = envpack.pack(prefix, tmp_path / "alpa.sqsh")
    assert packed.image and envpack.read(tmp_path / "alpa.sqsh") == packed
    out = sub.launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", variant="8gpu", nodes=2, smoke_only=True,
                                                   gpus_per_node=1, packed=packed),
                     argv=["pytest"], env=slurm_cluster.env, timeout=180)
    assert out.result.state == "COMPLETED", out.result.tail()
    text = Path(out.result.stdout_path).read_text()
    for node in ("node1", "node2"):
        assert f"envbuild: {node} checked the image (sha256 {packed.sha256[:16]}); the task mounts it at {prefix}" \
            in text
        assert f"envbuild: {node} mounted the image at {prefix}" in text
    assert "unpacked it" not in text
    report = collect(out.run_dir)
    costs = [c for n in report.nodes for c in n.import_cost]
    assert [(c.rank, c.from_image, c.fs_type, c.shared) for c in costs] == [
        (0, True, "fuse.squashfuse", False), (1, True, "fuse.squashfuse", False)], costs
    assert "(mounted from the image)" in render(report, "md")
    assert json.loads((out.run_dir / "launch.json").read_text())["packed"]["format"] == "squashfs"


def _sent(cluster) -> dict[str, int]:
    """The bytes each test-bed node has sent on its network interface so far."""
    import subprocess

    out = {}
    for node in cluster.nodes:
        link = subprocess.run(["ip", "-n", node.netns, "-s", "-j", "link", "show", "eth0"], capture_output=True,
                              text=True, check=True).stdout
        out[node.name] = int(json.loads(link)[0]["stats64"]["tx"]["bytes"])
    return out


def test_the_pack_goes_down_sbcasts_tree_each_node_passing_it_on(home, tmp_path) -> None:
    """Three nodes of their own test bed whose slurm.conf has TreeWidth=1, and a pack of 16 MB:
    with envbuild's default fan-out (1) the batch host sends one copy, node2 passes it to
    node3 and node3 sends none, every copy checked; with --fanout 8 sbcast itself sends one to
    each other node (Slurm 22.05: the first hop is sbcast's --fanout, every hop below it the
    forwarding slurmd's TreeWidth). Read from each node's own network counters, so a star
    where a chain is asked for fails it."""
    from envbuild.bundle import envpack
    from envbuild.launch.job import sbcast_fanout
    from envbuild.testbed.slurm import slurm_cluster

    assert sbcast_fanout(16) == 1 and sbcast_fanout(17) == 2
    rec, tgt = load_recipe("alpa-megatron"), load_target("slurm")
    with slurm_cluster(3, gpus_per_node=1, cpus_per_node=2, node_local=tmp_path / "local",
                       tree_width=1) as cluster:
        prefix = cluster.node_local / "envs" / "alpa-megatron"
        plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=str(prefix), host="slurm")).plan
        materialize(plan, tmp_path / "files", rec)
        (prefix / "payload.bin").write_bytes(os.urandom(16 << 20))  # incompressible: the pack is ~16 MB
        packed = envpack.pack(prefix, tmp_path / "alpa.tar.gz")
        for fanout, expect in ((None, {"node1": 1, "node2": 1, "node3": 0}),
                               (8, {"node1": 2, "node2": 0, "node3": 0})):
            before = _sent(cluster)
            out = sub.launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", variant="8gpu", nodes=3,
                                                           gpus_per_node=1, command_override="true",
                                                           packed=packed, fanout=fanout),
                             argv=["pytest"], env=cluster.env, timeout=180)
            assert out.result.state == "COMPLETED", out.result.tail()
            text = Path(out.result.stdout_path).read_text()
            assert all(f"envbuild: {n} checked the pack" in text for n in ("node1", "node2", "node3"))
            copies = {n: (b - before[n]) / packed.bytes for n, b in _sent(cluster).items()}
            # each node's copies of the pack sent, within 0.1 of a copy (Slurm's own messages)
            assert all(abs(copies[n] - expect[n]) < 0.1 for n in expect), (fanout, copies)


def test_a_pack_unpacks_only_at_its_own_prefix(tmp_path) -> None:
    from envbuild.bundle import envpack
    from envbuild.errors import InputError
    from envbuild.launch.job import build_job

    rec, tgt = load_recipe("alpa-megatron"), load_target("slurm")
    plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=str(tmp_path / "a"), host="slurm")).plan
    packed = envpack.PackedEnv(archive="/x.tar.gz", sha256="0" * 64, bytes=1, prefix=str(tmp_path / "b"))
    with pytest.raises(InputError, match="the pack holds the environment of .*/b; this plan's prefix is .*/a") as err:
        build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", smoke_only=True, packed=packed))
    assert "a pack unpacks at the path it was made at" in err.value.hint
    with pytest.raises(InputError, match="Slurm's sbcast"):
        build_job(rec, tgt, plan, LaunchOptions(scheduler="local", smoke_only=True,
                                                packed=envpack.PackedEnv("/x", "0" * 64, 1, str(tmp_path / "a"))))
    with pytest.raises(InputError, match="holds no environment envbuild made"):
        envpack.pack(tmp_path / "a", tmp_path / "p.tar.gz")
    assert not (tmp_path / "p.tar.gz").exists()
    # the sbatch script: sbcast, then each node's check, then the task
    from envbuild.launch.slurm import render

    mine = envpack.PackedEnv("/x.tar.gz", "0" * 64, 1, str(tmp_path / "a"), steps={"env-file": "0", "smoke": "0"})
    text = render(build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", smoke_only=True, packed=mine)))
    assert "sbcast --force --fanout=1 /x.tar.gz " in text  # the default for up to 16 nodes
    wide = build_job(rec, tgt, plan, LaunchOptions(scheduler="slurm", smoke_only=True, packed=mine, fanout=8))
    assert "sbcast --force --fanout=8 /x.tar.gz " in render(wide)
    assert text.index("sbcast") < text.index("sha256sum -c") < text.index("# the task every node runs")


@pytest.mark.process
def test_a_packs_unpack_line_runs_its_paths_as_data(tmp_path) -> None:
    """The node's unpack command of a pack whose prefix holds shell syntax: run by sh as the
    node would, it checks the copy and unpacks it there, and runs none of that syntax."""
    import shlex
    import subprocess

    from envbuild.bundle import envpack
    from envbuild.launch.slurm import distribute

    prefix = tmp_path / 'e$(touch pwned)"`touch pwned2`'
    (prefix / ".envbuild").mkdir(parents=True)
    (prefix / ".envbuild" / "env.sh").write_text("export X=1\n")
    packed = envpack.pack(prefix, tmp_path / "p.tar.gz")
    copy = Path(f"{str(prefix).rstrip('/')}.pack-{packed.sha256[:16]}.tar.gz")
    copy.write_bytes((tmp_path / "p.tar.gz").read_bytes())  # where sbcast would have put it

    class Job:
        pass
    job = Job()
    job.packed, job.fanout = packed, 1
    script = shlex.split(distribute(job)[-1])[-1]  # srun ... sh -c SCRIPT
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"and unpacked it at {prefix}" in proc.stdout
    assert (prefix / ".envbuild" / "env.sh").read_text() == "export X=1\n" and not copy.exists()
    assert not list(tmp_path.rglob("pwned*"))


@pytest.mark.process
@pytest.mark.skipif(not shutil.which("mksquashfs") or not shutil.which("squashfuse") or not os.access("/dev/fuse", os.W_OK),
                    reason="squashfs-tools/squashfuse or /dev/fuse missing (.ci/apt-packages.txt installs them)")
def test_a_squashfs_tasks_mount_is_undone_with_its_exit_status_kept(tmp_path) -> None:
    """A squashfs pack whose prefix holds shell syntax, as a node runs it: the distribute step
    checks the copy and leaves it, the task mounts it, reads the environment from the mount,
    fails with its own status (3, from inside the mount), and at exit the mount is undone and
    the copy removed; no syntax in the path ran."""
    import shlex
    import subprocess

    from envbuild.bundle import envpack
    from envbuild.launch.job import mount_lines
    from envbuild.launch.slurm import distribute

    prefix = tmp_path / 'e$(touch pwned)"`touch pwned2`'
    (prefix / ".envbuild").mkdir(parents=True)
    (prefix / ".envbuild" / "env.sh").write_text("export X=from-the-image\n")
    packed = envpack.pack(prefix, tmp_path / "p.sqsh")
    copy = Path(packed.node_copy())
    copy.write_bytes((tmp_path / "p.sqsh").read_bytes())  # where sbcast would have put it

    class Job:
        pass
    job = Job()
    job.packed, job.fanout = packed, 1
    script = shlex.split(distribute(job)[-1])[-1]
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"checked the image (sha256 {packed.sha256[:16]}); the task mounts it at {prefix}" in proc.stdout
    assert copy.exists() and prefix.is_dir() and not any(prefix.iterdir())  # kept, not unpacked
    task = "\n".join(["set -euo pipefail", *mount_lines(packed), f". {shlex.quote(str(prefix))}/.envbuild/env.sh",
                      f"cd {shlex.quote(str(prefix))}", 'echo "X=$X"', "touch here 2>/dev/null || echo read-only",
                      "exit 3"])
    proc = subprocess.run(["bash", "-c", task], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "X=from-the-image" in proc.stdout and "read-only" in proc.stdout and "mounted the image at" in proc.stdout
    mounts = Path("/proc/self/mounts").read_text()
    assert "fuse.squashfuse" not in "".join(line for line in mounts.splitlines(True) if str(tmp_path) in line)
    assert not copy.exists() and not any(prefix.iterdir())
    assert not list(tmp_path.rglob("pwned*"))
