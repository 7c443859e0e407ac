"""A recipe of the user's own, with its own ``run:`` section, launched for real on Slurm and on
the local scheduler with no change to envbuild (issue 20's done-criterion).

The recipe is written by the test into its own folder, under a name no shipped recipe has
(``tally-bench``), and given to ``envbuild launch`` by its path. Its environment is
cpu-reference's; its benchmark and its runs are the user's:

* the program, ``tally.py``, ships in the run's ``files:`` (written into the job's folder,
  ``$JOB_DIR``): it counts the tokens of a generated text, and prints the count per second as
  an ``envbuild.smoke/1`` record, the format of envbuild's own ``envbuild-smoke`` parser;
* ``run.default`` (the benchmark's command): ``once``, its log sent to a file of its working
  folder (``output.file``, printed after the run by envbuild's capture), launched with
  ``--scheduler local``;
* ``run.pair`` (a variant): ``per-node`` on 2 nodes with the user's own multi-node arguments
  (``--nnodes``, ``--node-rank``, ``--master ADDR:PORT``, ``--ranks-dir {job_dir}/ranks``):
  rank 0 listens on the master address, every other rank reports to it over TCP, and rank 0
  prints the record of all ranks; launched with ``--scheduler slurm`` on the shared Slurm
  cluster (``slurm_cluster``: 2 nodes in network namespaces, each its own hostname).

Both runs are CPU programs (``gpus_per_node: 0``) launched from one plan on the ``slurm``
target, whose profile assumes 8 GPUs a node (``--scheduler local`` runs it on this node), with
no lock (a recipe of one's own has none until ``envbuild lock``). The environment is a stand-in
of the plan's (``envbuild.testbed.planenv``: a venv seeing this interpreter's packages, the
plan's env file), built once for the module; the program needs only the standard library.
Each run must be judged PASS: the record complete (``ok: true``) and its figure at or above
the recipe's threshold (``envbuild.smoke.judge``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from envbuild.cli import main
from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe, recipe_names
from envbuild.shipped import RECIPES
from envbuild.smoke.native import parse
from envbuild.targets import load_target
from envbuild.testbed.planenv import materialize

pytestmark = pytest.mark.integration

NAME = "tally-bench"
THRESHOLD = 1000.0  # tokens per second: a run that counts at all is far above it
STEPS = 40

# the user's program, shipped in the recipe (run.<name>.files): standard library only
TALLY = r'''
"""tally.py: count the tokens of a generated text; with --nnodes N, rank 0 gathers every rank's count."""
import argparse, json, os, socket, sys, time

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, required=True)
p.add_argument("--log", help="write the log here instead of stdout")
p.add_argument("--nnodes", type=int, default=1)
p.add_argument("--node-rank", type=int, default=0)
p.add_argument("--master", default="")
p.add_argument("--ranks-dir")
a = p.parse_args()
host = socket.gethostname()
server = None
if a.nnodes > 1 and a.node_rank == 0:  # listen before counting: the others may finish first
    server = socket.create_server(("", int(a.master.rsplit(":", 1)[1])))
    server.settimeout(60)
text = " ".join(f"w{i % 97}" for i in range(20000))
t0 = time.perf_counter()
tokens = sum(len(text.split()) for _ in range(a.steps))
seconds = time.perf_counter() - t0
me = {"rank": a.node_rank, "nnodes": a.nnodes, "master": a.master, "host": host, "steps": a.steps,
      "tokens": tokens, "seconds": seconds, "argv": sys.argv[1:], "prefix": sys.prefix}
print(f"tally: rank {a.node_rank} of {a.nnodes} on {host}, master {a.master or '-'}, {tokens} tokens", flush=True)
if a.ranks_dir:
    os.makedirs(a.ranks_dir, exist_ok=True)
    with open(os.path.join(a.ranks_dir, f"rank-{a.node_rank}.json"), "w") as f:
        json.dump(me, f)
if a.node_rank > 0:
    addr, port = a.master.rsplit(":", 1)
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = socket.create_connection((addr, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with conn:
        conn.sendall(json.dumps(me).encode() + b"\n")
        assert conn.makefile().readline() == "ok\n"
    sys.exit(0)
ranks = [me]
while server is not None and len(ranks) < a.nnodes:
    conn, _ = server.accept()
    with conn:
        ranks.append(json.loads(conn.makefile().readline()))
        conn.sendall(b"ok\n")
ranks.sort(key=lambda r: r["rank"])
lines = [f"tally rank {r['rank']} on {r['host']}: {r['tokens']} tokens in {r['seconds']:.4f} s" for r in ranks]
record = {"schema": "envbuild.smoke/1", "kind": "tally", "ok": True,
          "tokens_per_s": sum(r["tokens"] for r in ranks) / max(r["seconds"] for r in ranks),
          "ranks": len(ranks), "hosts": [r["host"] for r in ranks], "prefixes": [r["prefix"] for r in ranks]}
out = "\n".join([*lines, json.dumps(record)]) + "\n"
if a.log:
    os.makedirs(os.path.dirname(a.log) or ".", exist_ok=True)
    with open(a.log, "w") as f:
        f.write(out)
    print(f"tally: log written to {a.log}")
else:
    sys.stdout.write(out)
'''


def user_recipe(folder: Path) -> Path:
    """cpu-reference's environment with the user's own benchmark and runs, as a file of its own."""
    data = yaml.safe_load((RECIPES / "cpu-reference.yaml").read_text())
    del data["default"]
    data.update(name=NAME, title="tally: a user's token counter", targets=["local", "slurm"],
                description="A recipe of a user's own: cpu-reference's environment, the user's program.")
    data["benchmark"] = {
        "command": f'python "$JOB_DIR"/tally.py --steps {STEPS} --log tally/out.log',
        "variants": {"pair": f'python "$JOB_DIR"/tally.py --steps {STEPS}'},
        "parser": "envbuild-smoke", "metric": "tokens_per_second", "unit": "tokens/s",
        "threshold": THRESHOLD, "needs_gpus": 0, "why": "the user's floor: a run that counts at all meets it"}
    mine = {"files": {"tally.py": TALLY}, "gpus_per_node": 0, "source": "tally.py (the user's own)"}
    data["run"] = {
        "default": {**mine, "launcher": "once", "why": "one process on one node",
                    "output": {"file": "tally/out.log", "source": "tally.py --log",
                               "why": "with --log the program writes its log there, not on stdout"}},
        "pair": {**mine, "launcher": "per-node", "nodes": 2, "min_nodes": 2, "max_nodes": None,
                 "why": "one process a node; rank 0 gathers the others' counts over TCP",
                 "multi_node_args": ["--nnodes", "$ENVBUILD_NNODES", "--node-rank", "$ENVBUILD_NODE_RANK",
                                     "--master", "$ENVBUILD_MASTER_ADDR:$ENVBUILD_MASTER_PORT",
                                     "--ranks-dir", "{job_dir}/ranks"]},
    }
    path = folder / "my-recipes" / f"{NAME}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def stand_in(module_tmp):
    """(recipe file, plan): the user's recipe and its plan on the slurm target, the plan's
    stand-in environment built once."""
    root = module_tmp("user-recipe")
    path = user_recipe(root)
    rec, tgt = load_recipe(path), load_target("slurm")
    assert rec.name == NAME and NAME not in recipe_names()
    plan = resolve(rec, tgt, from_target(tgt), None, PlanOptions(prefix=str(root / "env"), host="slurm")).plan
    materialize(plan, root / "files", rec)
    return path, plan


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _launch(path: Path, plan, scheduler: str, *args: str, capsys) -> tuple[int, dict, str]:
    rc = main(["launch", str(path), "-t", "slurm", "--scheduler", scheduler, "--prefix", plan.prefix,
               *args, "--submit", "--json", "--timeout", "120"])
    captured = capsys.readouterr()
    assert captured.out.strip(), f"exit {rc}: {captured.err}"
    return rc, json.loads(captured.out), captured.err


def _judged(res: dict) -> dict:
    """The native section: the user's record parsed with envbuild-smoke and judged against the
    recipe's threshold (a PASS needs a complete run and the figure at or above it)."""
    native = res["results"]["native"]
    assert native["ran"] is True and native["parser"] == "envbuild-smoke" and "replaced" not in native
    assert native["metrics"]["kind"] == "tally" and native["metrics"]["ok"] is True
    verdict = native["verdict"]
    assert verdict["metric"] == "tokens_per_second" and verdict["compared"]["value"] == THRESHOLD
    assert verdict["value"] == native["metrics"]["tokens_per_s"] >= THRESHOLD
    assert verdict["completion"]["state"] == "complete"
    assert verdict["completion"]["detail"] == "the smoke record says ok"
    assert verdict["verdict"] == "PASS" and res["status"] == "PASS" and res["passed"] is True
    return native


def _run_dir(res: dict, scheduler: str, variant: str | None, job_state: str) -> Path:
    run = Path(res["run"])
    launch = json.loads((run / "launch.json").read_text())
    assert launch["scheduler"] == scheduler and launch["status"] == "PASS" and launch["passed"] is True
    assert launch["job"]["state"] == job_state and launch["replaced"] is None
    record = json.loads((run / "run.json").read_text())
    assert record["recipe"] == NAME and record["target"] == "slurm" and record["status"] == "ok"
    assert record["job"]["state"] == job_state
    assert record["options"]["launch"].get("variant") == variant
    # the recipe the run was made from is the user's file, its own run section included
    recipe = json.loads((run / "recipe.json").read_text())
    assert recipe["name"] == NAME and recipe["run"]["pair"]["launcher"] == "per-node"
    return run


def test_the_users_per_node_variant_runs_on_two_slurm_nodes(stand_in, slurm_cluster, home, monkeypatch,
                                                            capsys) -> None:
    """``run.pair``: one task per node, each the user's command with its multi-node arguments
    filled by the sbatch script (node count, node rank, the first node and the job's port)."""
    path, plan = stand_in
    for k, v in slurm_cluster.env.items():
        monkeypatch.setenv(k, v)
    rc, res, err = _launch(path, plan, "slurm", "--variant", "pair", capsys=capsys)
    assert rc == 0, err
    job = res["job"]
    assert job["state"] == "COMPLETED" and job["exit_code"] == "0:0", job["tail"]
    run = _run_dir(res, "slurm", "pair", "COMPLETED")
    script = (run / "job" / "envbuild-tally-bench.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "--gres" not in script  # 0 GPUs: none asked for
    # each node's rank wrote what reached it: the count, its rank, the first node and the port
    port = int(job["job_id"]) % 16384 + 49152  # slurm.py's default rendezvous port
    ranks = [json.loads((run / "job" / "ranks" / f"rank-{r}.json").read_text()) for r in (0, 1)]
    for rank, got in enumerate(ranks):
        assert got["argv"] == ["--steps", str(STEPS), "--nnodes", "2", "--node-rank", str(rank),
                               "--master", f"node1:{port}", "--ranks-dir", str(run / "job" / "ranks")]
        assert got["prefix"] == plan.prefix  # the plan's environment, sourced on each node
    assert [r["host"] for r in ranks] == ["node1", "node2"]  # one task on each node
    out = Path(job["stdout_path"]).read_text()
    assert f"tally: rank 1 of 2 on node2, master node1:{port}" in out
    # rank 0 heard rank 1 over TCP: the record counts both ranks' tokens
    native = _judged(res)
    record = json.loads(out.strip().splitlines()[-1])
    assert record["ranks"] == 2 and record["hosts"] == ["node1", "node2"]
    assert native["metrics"] == parse("envbuild-smoke", out)
    # the job's nodes as Slurm names them (its NodeList, expanded), the results under its batch node
    assert res["node"] == res["node_dir"] == "node1" and res["nodes"] == ["node1", "node2"]
    assert json.loads((run / "run.json").read_text())["hosts"] == ["node1", "node2"]
    assert json.loads((run / "launch.json").read_text())["nodes"] == ["node1", "node2"]
    assert json.loads((run / "nodes" / "node1" / "smoke.json").read_text()) == res["results"]
    # envbuild report judges the run from its directory: the user's figure met its threshold;
    # the verdict is FAIL only because a stand-in's installed state was never observed
    assert main(["report", str(run), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {r["kind"] for r in report["verdict"]["reasons"]} == {"unobserved"}
    [bench] = [b for n in report["nodes"] for b in n["benchmarks"]]
    assert bench["name"] == "native.tokens_per_second" and bench["passed"] is True
    assert bench["threshold"] == THRESHOLD and bench["value"] == native["verdict"]["value"]


def test_the_users_default_run_goes_local_with_its_log_file(stand_in, home, capsys) -> None:
    """``run.default``: one process on this node; its log is the file the run's ``output`` names,
    printed after the command by envbuild's capture and parsed from the job's output."""
    path, plan = stand_in
    rc, res, err = _launch(path, plan, "local", capsys=capsys)
    assert rc == 0, err
    job = res["job"]
    assert job["state"] == "COMPLETED" and job["exit_code"] == "0", job["tail"]
    run = _run_dir(res, "local", None, "COMPLETED")
    out = Path(job["stdout_path"]).read_text()
    assert "tally: log written to tally/out.log" in out
    assert "envbuild: the training output is in tally/out.log:" in out
    assert "tally: rank 0 of 1 on " in out and ", master -," in out  # one node: no multi-node arguments
    native = _judged(res)
    assert native["metrics"] == parse("envbuild-smoke", out)
    log = Path(plan.prefix) / ".envbuild" / "smoke" / "tally" / "out.log"  # the command's working folder
    record = json.loads(log.read_text().splitlines()[-1])
    assert record["tokens_per_s"] == native["metrics"]["tokens_per_s"] and record["prefixes"] == [plan.prefix]
    assert not (run / "job" / "ranks").exists()
    assert (run / "job" / "tally.py").read_text() == TALLY
