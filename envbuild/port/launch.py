"""How the variant runs on the node: its launcher; a benchmark that goes through a scheduler the
node lacks (read in the command and the scripts it runs) becomes the published program through
its own launcher on one node where the recipe's ``run:`` layout names that program, and is
undecided where it does not; the downloads stay as published."""

from __future__ import annotations

import re
import shlex

from envbuild.port.fixes import launch_of
from envbuild.port.state import TEST, Port
from envbuild.recipes.schema import Run

SCHEDULER_WORDS = re.compile(r"\b(sbatch|srun|salloc|qsub|mpiexec|mpirun|aprun|kubectl)\b|PBS_NODEFILE|#PBS|#SBATCH"
                             r"|SLURM_JOB|SLURM_NODELIST")
#: the folder (in the benchmark's working folder) where a run layout's files are written
JOB_DIR = ".envbuild-job"
#: launchers whose layout names the program and its arguments (argv), whatever the scheduler
PROGRAM_LAUNCHERS = ("deepspeed", "torchrun")


def port_launch(p: Port) -> None:
    """The launcher the node has; a command or script that needs a scheduler the node lacks
    runs the published program on the node (``on_the_node``) or is undecided, with the line
    that shows it."""
    r = p.recipe
    if r.launcher in ("slurm", "pbs", "kubernetes") and p.target.scheduler != r.launcher:
        p.data["launcher"] = "local"
        p.deviate(f"launcher-{r.launcher}", f"launcher {r.launcher}",
                  f"{p.target.name} has no {r.launcher} (scheduler: {p.target.scheduler})",
                  "launcher local: the benchmark runs on the node itself", r.published.url,
                  ["envbuild.port.launch:port_launch", "envbuild.compat.rules_node:_scheduler"],
                  [TEST + "test_port_leaves_scheduler_launches_undecided"])
    pods = [k for k, run in r.run.items() if run.launcher == "pods"]
    if pods and p.target.scheduler != "kubernetes":
        p.data["run"] = {k: v for k, v in p.data.get("run", {}).items() if k not in pods}
        p.deviate("pods-layouts", f"run: {', '.join(pods)} (pods: one rank per Kubernetes pod)",
                  f"{p.target.name} has no Kubernetes (scheduler: {p.target.scheduler})",
                  "those layouts are left out; the commands run on one node", r.published.url,
                  ["envbuild.port.launch:port_launch", "envbuild.compat.rules_node:_one_node"],
                  [TEST + "test_port_leaves_scheduler_launches_undecided"])
    if r.benchmark is None or p.target.scheduler != "none":
        return
    why = needs_scheduler(p, r.benchmark.command)
    if why is None:
        return
    run = r.run_of(None)
    if run is None or run.launcher not in PROGRAM_LAUNCHERS or run.min_nodes > 1:
        p.leave("benchmark.command", f"{why}; {p.target.name} has no scheduler, and the recipe's run layout "
                f"({'run.default: ' + run.launcher if run else 'none'}) does not name the program it starts "
                "(a deepspeed or torchrun layout with its argv would): write the command that runs the benchmark "
                "on the node")
        return
    on_the_node(p, run, why)


def needs_scheduler(p: Port, command: str) -> str | None:
    """Why ``command`` needs a scheduler: its own word, or the line of a script it runs (in
    the trees read) that starts or reads one; None when nothing shows it."""
    m = SCHEDULER_WORDS.search(command)
    if m:
        return f"the published command starts {m.group(0)!r} ({command[:80]})"
    for name, tree in p.found.trees.items():
        for path in sorted(launch_of(p, name, tree)):
            if not path.endswith((".sh", ".slurm", ".pbs")):
                continue
            text = tree.read(path) or ""
            hit = SCHEDULER_WORDS.search(text)
            if hit:
                line = text.count("\n", 0, hit.start()) + 1
                return f"{name}:{path}:{line} (which the command runs) uses {hit.group(0)!r}"
    return None


def node_command(run: Run, gpus: int) -> str:
    """The program of a ``deepspeed``/``torchrun`` run layout on one node with ``gpus`` GPUs,
    as shell text run in the benchmark's working folder (``{cwd}``): the layout's files are
    written into ``JOB_DIR`` (``{job_dir}``) first. torchrun as ``python -m
    torch.distributed.run`` (the environment's interpreter: fix row torchrun-of-the-env).

    >>> print(node_command(Run(launcher="deepspeed", argv=["{cwd}/train.py", "--cfg={job_dir}/c.json"],
    ...                        files={"c.json": "{}\\n"}, source="s", why="w"), 2), end="")
    set -e
    mkdir -p .envbuild-job
    cat > .envbuild-job/c.json <<'ENVBUILD_EOF'
    {}
    ENVBUILD_EOF
    deepspeed --num_gpus 2 ./train.py --cfg=.envbuild-job/c.json
    """
    lines = ["set -e"]
    if run.files:
        lines.append(f"mkdir -p {JOB_DIR}")
    for name, text in sorted(run.files.items()):
        lines += [f"cat > {JOB_DIR}/{name} <<'ENVBUILD_EOF'", text.rstrip("\n"), "ENVBUILD_EOF"]
    words = shlex.join(w.replace("{cwd}", ".").replace("{job_dir}", JOB_DIR) for w in run.argv)
    start = (f"deepspeed --num_gpus {gpus}" if run.launcher == "deepspeed"
             else f"python -m torch.distributed.run --standalone --nproc_per_node {gpus}")
    lines.append(f"{start} {words}")
    return "\n".join(lines) + "\n"


def on_the_node(p: Port, run: Run, why: str) -> None:
    """The benchmark as the published program through its own launcher on one node, with the
    GPUs the published command runs per node; variants whose layout needs more nodes go."""
    r, bench = p.recipe, p.data["benchmark"]
    gpus = run.gpus_per_node if run.gpus_per_node is not None else max(r.benchmark.needs_gpus, 1)
    bench["command"] = node_command(run, gpus)
    bench["why"] = (f"The published program and arguments (run.default, {run.source}) through its own "
                    f"{run.launcher} launcher on one node with {gpus} GPU(s), as the published command runs them "
                    f"there; drafted by envbuild port (the published command needs a scheduler). "
                    f"{str(bench.get('why') or '').strip()}").strip()
    dropped = []
    for name, command in r.benchmark.variants.items():
        layout = r.run_of(name)
        if needs_scheduler(p, command) is None:
            continue
        if layout is not None and layout.launcher in PROGRAM_LAUNCHERS and layout.min_nodes == 1:
            bench["variants"][name] = node_command(layout, layout.gpus_per_node or gpus)
        else:
            dropped.append(name)
            bench["variants"].pop(name)
            p.data.get("run", {}).pop(name, None)
    if not bench.get("variants"):
        bench.pop("variants", None)
    p.deviate("benchmark-on-the-node", r.benchmark.command,
              f"{why}; {p.target.name} has no scheduler (scheduler: {p.target.scheduler})",
              f"the program of run.default ({run.source}) through `{run.launcher}` on the node with {gpus} GPU(s), "
              f"its files ({', '.join(sorted(run.files)) or 'none'}) written into {JOB_DIR} first, as "
              "`envbuild launch --scheduler local` runs that layout"
              + (f"; the variants {', '.join(dropped)} need more than one node and are left out" if dropped else ""),
              r.benchmark.source.url if r.benchmark.source else r.published.url,
              ["envbuild.port.launch:on_the_node", "envbuild.plan.smoke:native_run"],
              [TEST + "test_port_runs_the_published_program_without_its_scheduler"])


def port_data(p: Port) -> None:
    """The downloads stay as published: what a file is does not depend on the GPUs; the data
    step fetches and checks it on a node that reaches it, and ``envbuild bundle`` packs it for
    one that does not (from ``--data-mirror`` or its URL, sha256-checked where the recipe has one)."""
    if p.recipe.data:
        p.notes.append(f"data kept as published ({', '.join(d.name for d in p.recipe.data)}): fetched by the data "
                       "step, or packed by `envbuild bundle` for a node without network")
