"""How the variant runs on the node: its launcher, a scheduler launch the node lacks (read in
the scripts the benchmark starts), and the downloads it needs, left undecided."""

from __future__ import annotations

import re

from envbuild.port.fixes import launch_of
from envbuild.port.state import TEST, Port

SCHEDULER_WORDS = re.compile(r"\b(sbatch|srun|salloc|qsub|mpiexec|mpirun|aprun|kubectl)\b|PBS_NODEFILE|#PBS|#SBATCH"
                             r"|SLURM_JOB|SLURM_NODELIST")


def port_launch(p: Port) -> None:
    """The launcher the node has; a command or script that needs a scheduler the node lacks
    is undecided, with the line that shows it."""
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
    m = SCHEDULER_WORDS.search(r.benchmark.command)
    if m:
        p.leave("benchmark.command", f"the published command starts {m.group(0)!r} ({r.benchmark.command[:80]}); "
                f"{p.target.name} has no scheduler: write the command that runs the benchmark on the node")
        return
    for name, tree in p.found.trees.items():
        for path in sorted(launch_of(p, name, tree)):
            if not path.endswith((".sh", ".slurm", ".pbs")):
                continue
            text = tree.read(path) or ""
            hit = SCHEDULER_WORDS.search(text)
            if hit:
                line = text.count("\n", 0, hit.start()) + 1
                p.leave("benchmark.command", f"{name}:{path}:{line} (which the command runs) uses {hit.group(0)!r}; "
                        f"{p.target.name} has no scheduler: write the command that runs the benchmark on the node")
                return


def port_data(p: Port) -> None:
    for i, d in enumerate(p.recipe.data):
        p.leave(f"data[{i}]", f"{d.name} is downloaded from {d.url}: say whether the node reaches it, or "
                "give it from a bundle or a data mirror (envbuild bundle packs it), or replace it")


#: the recipe field an error row of the final preflight points at
