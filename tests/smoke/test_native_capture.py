"""The native run captures the training output for real (envbuild.plan.capture).

Two published scripts do not leave it on their own stdout: ALCF's ``train-gpt3.sh`` starts
training in the background (``elasticDistributed "$@" 2>&1 &``) and exits, and MegatronApp's
``run_single.sh`` sends it into ``trace_pipeline_4_model_chunks_4.txt``. Here trees of that
shape are made by the test (the scripts' control flow as published, the training program
replaced by a replay of the committed output of the setups' own printing code,
tests/data/native_logs), then run by bash: as the smoke step's native run plans them, and
through ``envbuild launch --submit`` (local scheduler, over a stand-in environment). The
GPUs, mpiexec and torchrun are what is absent; the shell around them is what runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from envbuild.recipes import load_recipe
from envbuild.plan.capture import capture
from envbuild.smoke.native import parse
from envbuild.plan.smoke import native_run
from support.paths import DATA, ROOT

LOGS = DATA / "native_logs"
POLARIS_LOG = LOGS / "polaris-megatron-deepspeed" / "train-gpt3.log"
TRACE_LOG = LOGS / "megatronapp" / "trace_pipeline_4_model_chunks_4.txt"


def polaris_tree(root: Path, delay: float = 1.0) -> Path:
    """A checkout whose ALCF scripts end as the published ones (train-gpt3.sh and launch.sh at
    e4bac70): ``elasticDistributed "$@" 2>&1 &`` is the last command, and elasticDistributed
    names ``OUTPUT_LOG=outputs/.../logs/<user>-<host>-nhosts<N>-ngpu<G>-<stamp>.log``, appends
    that path to ``logfiles``, runs the training ``>> "$OUTPUT_LOG" 2>&1 &`` and waits for it.
    The training (here: the committed log after ``delay`` seconds, exit $TRAIN_RC) writes
    nothing on stdout; the scripts' echo lines do."""
    (root / "ALCF").mkdir(parents=True)
    (root / "ALCF" / "train-gpt3.sh").write_text(
        "#!/bin/bash --login\n"
        "echo \"ALCF_DIR: $(pwd)/ALCF\"\n"
        "launchJob() {\n"
        f"  sleep {delay}\n"
        f"  cat {POLARIS_LOG}\n"
        "  return \"${TRAIN_RC:-0}\"\n"
        "}\n"
        "elasticDistributed() {\n"
        "  OUTPUT_LOG=\"$(pwd)/outputs/run/logs/$USER-$(uname -n)-nhosts1-ngpu4-$(date +%s%N).log\"\n"
        "  echo \"Writing logs to: ${OUTPUT_LOG}\"\n"
        "  mkdir -p \"$(dirname \"${OUTPUT_LOG}\")\"\n"
        "  echo \"${OUTPUT_LOG}\" >> \"$(pwd)/logfiles\"\n"
        "  launchJob \"$@\" >> \"${OUTPUT_LOG}\" 2>&1 &\n"
        "  PID=$!\n"
        "  wait $PID\n"
        "}\n"
        "elasticDistributed \"$@\" 2>&1 &\n")
    (root / "ALCF" / "train-gpt3.sh").chmod(0o755)
    return root


def megatronapp_tree(root: Path, writes: bool = True) -> Path:
    """A checkout whose run_single.sh ends as the published one (argument loop, then
    ``bash script/benchmark.sh train >trace_pipeline_${P}_model_chunks_${C}.txt``); here
    benchmark.sh replays the committed trace (or fails before writing a line)."""
    (root / "script").mkdir(parents=True)
    (root / "run_single.sh").write_text(
        "#!/bin/bash\nPIPELINE_PARALLEL=4\nMODEL_CHUNKS=4\n"
        "while [[ $# -gt 0 ]]; do\n  case $1 in\n"
        "    --pipeline_parallel) PIPELINE_PARALLEL=$2; shift 2 ;;\n"
        "    --model_chunks) MODEL_CHUNKS=$2; shift 2 ;;\n"
        "    *) echo \"Unknown argument: $1\"; exit 1 ;;\n  esac\ndone\n"
        "bash script/benchmark.sh train >trace_pipeline_${PIPELINE_PARALLEL}_model_chunks_${MODEL_CHUNKS}.txt\n")
    body = f"cat {TRACE_LOG}\n" if writes else "echo 'torchrun: no GPU' >&2\nexit 7\n"
    (root / "script" / "benchmark.sh").write_text("#!/bin/bash\n" + body)
    return root


def _run(run: dict, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(run["argv"], cwd=run["cwd"], env={**os.environ, **run["env"], **(extra_env or {})},
                          capture_output=True, text=True, timeout=60)


def _bench(name: str) -> dict:
    return load_recipe(name).benchmark.model_dump(mode="json")


def test_every_output_a_shipped_recipe_names_is_captured_and_sourced() -> None:
    from envbuild.recipes import DATA

    load = load_recipe
    outputs = [(name, key, run.output) for name in sorted(p.stem for p in DATA.glob("*.yaml"))
               for key, run in load(name).run.items() if run.output is not None]
    assert {(n, k) for n, k, _ in outputs} == {("megatronapp", "default"), ("megatronapp-h100", "default"),
                                                 ("polaris-megatron-deepspeed", "default")}
    for name, key, out in outputs:
        rec = load(name)
        command = rec.benchmark.command if key == "default" else rec.benchmark.variants[key]
        assert out.source and out.why and (out.file or out.backgrounds)
        if out.file:
            assert out.file in rec.benchmark.why  # the recipe says where the output goes
        assert capture(out, command) != command
    assert capture(None, "python x.py") == "python x.py"  # output on stdout: unchanged
    assert load("megatronapp").output_of("two-pods-master") is None  # run_master.sh prints on stdout


@pytest.mark.process
def test_polaris_background_training_is_awaited_and_parsed(tmp_path) -> None:
    tree = polaris_tree(tmp_path / "megatron-deepspeed")
    # as published: the script returns before training printed anything (a batch job ends
    # there, its output file read while training has not written it), and a failed training
    # still exits 0
    with open(tmp_path / "plain.out", "w") as out:
        plain = subprocess.run(["bash", "-c", "./ALCF/train-gpt3.sh"], cwd=tree, stdout=out,
                               stderr=subprocess.STDOUT, env={**os.environ, "TRAIN_RC": "3"}, timeout=60)
    text = (tmp_path / "plain.out").read_text()
    assert plain.returncode == 0 and parse("megatron-deepspeed", text).get("samples_per_second") is None
    # the plain run's background job names its log in logfiles after the script returned: wait
    # for that line, or on a loaded machine it lands after the next run's and reads as the newest
    deadline = time.monotonic() + 30
    while not ((tree / "logfiles").is_file() and (tree / "logfiles").read_text().endswith("\n")):
        assert time.monotonic() < deadline, "the plain run's background job named no log in 30 s"
        time.sleep(0.05)
    run = native_run(_bench("polaris-megatron-deepspeed"), gpus=4, sources={"megatron-deepspeed": str(tree)},
                     cwd="/unused", output=load_recipe("polaris-megatron-deepspeed").output_of(None))
    proc = _run(run)
    assert proc.returncode == 0, proc.stderr
    metrics = parse("megatron-deepspeed", proc.stdout + proc.stderr)
    assert metrics["samples_per_second"] > 0 and metrics["iterations_logged"] == 10
    assert "ALCF_DIR:" in proc.stdout  # the script's own lines too
    logs = (tree / "logfiles").read_text().split()
    assert f"envbuild: the training output is in {logs[-1]}:" in proc.stdout
    # a training that fails fails the run (the background job's status, not the script's 0),
    # and the log of the earlier run, still listed in logfiles, is not read as this one's
    (tree / "ALCF" / "train-gpt3.sh").write_text("#!/bin/bash\nfalse &\n")
    failed = _run(run, {"TRAIN_RC": "3"})
    assert failed.returncode == 1 and "named no new log in logfiles" in failed.stderr
    assert parse("megatron-deepspeed", failed.stdout).get("samples_per_second") is None


def test_megatronapp_trace_file_is_collected_and_a_stale_one_never_read(tmp_path) -> None:
    tree = megatronapp_tree(tmp_path / "megatronapp")
    run = native_run(_bench("megatronapp"), gpus=4, sources={"megatronapp": str(tree)}, cwd="/unused",
                     output=load_recipe("megatronapp").output_of(None))
    proc = _run(run)
    assert proc.returncode == 0, proc.stderr
    assert "envbuild: the training output is in trace_pipeline_4_model_chunks_4.txt:" in proc.stdout
    metrics = parse("megatronapp", proc.stdout)
    assert metrics["iteration_time_ms"] > 0 and metrics["trace_ranks"] == 4
    # the same run without the capture: its stdout holds none of it
    plain = subprocess.run(["bash", "-c", load_recipe("megatronapp").benchmark.command], cwd=tree,
                           capture_output=True, text=True, timeout=60)
    assert parse("megatronapp", plain.stdout).get("iteration_time_ms") is None

    broken = megatronapp_tree(tmp_path / "broken", writes=False)
    (broken / "trace_pipeline_4_model_chunks_4.txt").write_text(TRACE_LOG.read_text())  # an earlier run's
    run = native_run(_bench("megatronapp"), gpus=4, sources={"megatronapp": str(broken)}, cwd="/unused",
                     output=load_recipe("megatronapp").output_of(None))
    proc = _run(run)
    assert proc.returncode == 7 and "torchrun: no GPU" in proc.stderr
    # the shell's redirection created the file empty before benchmark.sh failed: nothing parsed
    assert parse("megatronapp", proc.stdout).get("iteration_time_ms") is None


@pytest.mark.integration
@pytest.mark.parametrize("name,target,tree", [
    ("polaris-megatron-deepspeed", "polaris", polaris_tree),
    ("megatronapp", "rtx4090-pod", megatronapp_tree),
])
def test_launch_submit_collects_the_training_output(tmp_path, monkeypatch, name, target, tree) -> None:
    """``envbuild launch --submit --scheduler local`` over a stand-in environment (a venv of
    this interpreter with the plan's env file): the job's output file holds the training
    output and the run's smoke.json its parsed metric. Polaris's task loads its conda module:
    no Lmod here, so ``module`` is a no-op shell function (the module's Python is not used)."""
    from envbuild.facts.profile import from_target
    from envbuild.launch import LaunchOptions
    from envbuild.launch import submit as sub
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import resolve
    from envbuild.targets import load_target
    from envbuild.testbed.planenv import materialize
    from support.ib_inventory import profile_facts

    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    rec, tgt = load_recipe(name), load_target(target)
    facts = profile_facts(tgt) if name == "megatronapp" else from_target(tgt)
    plan = resolve(rec, tgt, facts, None, PlanOptions(prefix=str(tmp_path / "env"), host=target,
                                                      backend="venv")).plan
    materialize(plan, tmp_path / "files", rec)
    src = next(s.params.dest for s in plan.sources() if s.params.name in rec.benchmark.cwd)
    import shutil

    shutil.rmtree(src)
    tree(Path(src))
    env = {"BASH_FUNC_module%%": "() {  :\n}"}
    out = sub.launch(rec, tgt, plan, LaunchOptions(scheduler="local", gpus_per_node=4), argv=["pytest"],
                     env=env, timeout=120)
    assert out.result.state == "COMPLETED", out.result.tail()
    assert Path(out.result.stdout_path).name == f"envbuild-{name}-local.out"
    native = json.loads((out.run_dir / "nodes" / out.node / "smoke.json").read_text())["native"]
    assert native["ran"] and native["parser"] == rec.benchmark.parser
    assert native["metrics"][rec.benchmark.metric] > 0


POLARIS_COMMIT = "e4bac7019db92cfe49d6eeac00b5721652e516fe"


@pytest.mark.process
def test_the_published_alcf_scripts_at_their_commit_leave_the_output_where_it_is_read(tmp_path) -> None:
    """The published train-gpt3.sh, launch.sh, setup.sh, args.sh and model.sh themselves, at
    the recipe's pinned commit, from a git mirror (ENVBUILD_GIT_MIRROR; CI has no GitHub, so
    there this is skipped). Stand-ins only for what a Polaris node has and this one lacks:
    ``hostname`` (a Polaris compute node name: the scripts branch on ``x3*``), ``nvidia-smi -L``
    (the target's 4 GPUs), ``mpiexec`` (prints the committed Megatron-DeepSpeed log), ``conda``
    and the Lmod ``module`` function. Without the capture the job's stdout holds no iteration
    line; with it, every one."""
    from envbuild.gitsrc import mirror_path

    mirror = mirror_path("https://github.com/argonne-lcf/Megatron-DeepSpeed", os.environ.get("ENVBUILD_GIT_MIRROR"))
    if mirror is None:
        pytest.skip("no git mirror of argonne-lcf/Megatron-DeepSpeed (set ENVBUILD_GIT_MIRROR; CI has no GitHub)")
    tree, bin_dir = tmp_path / "megatron-deepspeed", tmp_path / "bin"
    tree.mkdir()
    bin_dir.mkdir()
    archive = subprocess.run(["git", "-C", str(mirror), "archive", POLARIS_COMMIT, "ALCF", "pretrain_gpt.py"],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    stand_ins = {
        "hostname": "echo x3006c0s13b0n0",
        "nvidia-smi": 'for i in 0 1 2 3; do echo "GPU $i: NVIDIA A100-SXM4-40GB (UUID: GPU-$i)"; done',
        "mpiexec": f"echo \"mpiexec stand-in: $*\" >&2\ncat {POLARIS_LOG}",
        "conda": "exit 0",
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "nodefile").write_text("x3006c0s13b0n0\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PBS_NODEFILE": str(tmp_path / "nodefile"),
           "BASH_FUNC_module%%": "() {  :\n}"}
    command = load_recipe("polaris-megatron-deepspeed").benchmark.command
    plain = subprocess.run(["bash", "-c", f"( . {command}; wait ${{!:-0}}; wait )"], cwd=tree,
                           env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    plain_metrics = parse("megatron-deepspeed", plain.stdout)
    assert "Writing logs to:" in plain.stdout and not plain_metrics.get("iterations_logged")
    assert plain_metrics.get("samples_per_second") is None
    run = native_run(_bench("polaris-megatron-deepspeed"), gpus=4, sources={"megatron-deepspeed": str(tree)},
                     cwd="/unused", output=load_recipe("polaris-megatron-deepspeed").output_of(None))
    proc = subprocess.run(run["argv"], cwd=run["cwd"], env={**os.environ, **run["env"], **env},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = (tree / "logfiles").read_text().split()[-1]
    assert "/outputs/" in log and "/logs/" in log and "-nhosts1-ngpu4-" in log  # launch.sh's own naming
    assert f"envbuild: the training output is in {log}:" in proc.stdout
    assert parse("megatron-deepspeed", proc.stdout)["iterations_logged"] == 10


RUN9 = ROOT / "docs" / "results" / "h100x4-run9"


def metaseq_tree(root: Path, bindir: Path) -> Path:
    """A metaseq checkout and an ``opt-baselines`` on PATH that keep metaseq 5ca60055's checkpoint
    rule: training restores ``<checkpoints-dir>/<prefix>...ngpu2/checkpoint_last.pt`` when it
    exists (checkpoint_utils.load_checkpoint) and writes it when it stops (train.py
    validate_and_save: ``or should_stop``). The training itself is absent (no GPU): a start
    from nothing replays the real log of a complete 2 x H100 run, a start from a checkpoint the
    real log of the run that resumed (docs/results/h100x4-run9)."""
    root.mkdir(parents=True)
    bindir.mkdir(parents=True)
    (bindir / "opt-baselines").write_text(
        "#!/bin/bash\n"
        "while [[ $# -gt 0 ]]; do\n  case $1 in\n"
        "    --checkpoints-dir) DIR=$2; shift 2 ;;\n    --prefix) PREFIX=$2; shift 2 ;;\n"
        "    *) shift ;;\n  esac\ndone\n"
        "SAVE=\"$DIR/$PREFIX.dummy_lm.ngpu2\"\n"
        "mkdir -p \"$SAVE\"\n"
        "if [ -f \"$SAVE/checkpoint_last.pt\" ]; then\n"
        f"  cat {RUN9 / 'opt-resumed' / 'native.out'}\n"
        "else\n"
        f"  cat {RUN9 / 'opt-run1' / 'native.out'}\n"
        "  echo weights > \"$SAVE/checkpoint_last.pt\"\n"
        "fi\n")
    (bindir / "opt-baselines").chmod(0o755)
    return root


@pytest.mark.process
def test_a_second_opt_run_starts_without_the_first_runs_checkpoint(tmp_path) -> None:
    """The recipe's ``fresh`` folder is removed before each run, so a second run of the benchmark
    in the same checkout trains from nothing and is judged complete; the same command without
    it resumes from the first run's checkpoint, trains nothing and is judged stopped, as it was
    on the lent H100s (opt-resumed)."""
    from envbuild.smoke.completion import completion

    tree = metaseq_tree(tmp_path / "metaseq", tmp_path / "bin")
    path = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    bench = _bench("opt-175b-azure-h100")
    assert [f["path"] for f in bench["fresh"]] == ["checkpoints"]
    run = native_run(bench, gpus=2, sources={"metaseq": str(tree)}, cwd="/unused")
    states = []
    for _ in range(2):
        proc = _run(run, path)
        assert proc.returncode == 0, proc.stderr
        states.append(completion("opt-baselines", proc.stdout).state)
        assert parse("opt-baselines", proc.stdout)["words_per_second"] > 0
    assert states == ["complete", "complete"]
    assert (tree / "checkpoints").is_dir()  # the last run's checkpoint stays for the user

    stale = native_run({**bench, "fresh": []}, gpus=2, sources={"metaseq": str(tree)}, cwd="/unused")
    proc = _run(stale, path)
    assert proc.returncode == 0
    assert completion("opt-baselines", proc.stdout).state == "stopped"
    assert parse("opt-baselines", proc.stdout).get("words_per_second") is None
    # the published recipe keeps the same folder fresh
    assert [f["path"] for f in _bench("opt-175b-azure")["fresh"]] == ["checkpoints"]


@pytest.mark.parametrize("path", ["/tmp/x", "../x", "a/../../x", "-rf", "a b", "x*", ".", "a/./b", "$HOME"])
def test_a_fresh_folder_outside_the_working_directory_is_refused(path) -> None:
    from pydantic import ValidationError

    from envbuild.recipes.schema import FreshFolder

    with pytest.raises(ValidationError, match="inside the benchmark's working directory"):
        FreshFolder(path=path, why="w", source={"url": "https://example.org"})
    assert FreshFolder(path="out/ckpt", why="w", source={"url": "https://example.org"}).path == "out/ckpt"
