"""A stand-in environment for a plan, for launch tests on machines without the recipe's GPUs.

``materialize(plan, files)`` makes ``plan.prefix`` look provisioned enough to launch from:

* a venv (``--without-pip``) whose site-packages see this interpreter's packages (torch CPU),
  standing in for the recipe's environment (which may need CUDA or an old Python);
* the plan's own ``env-file`` and ``smoke`` actions (the env file, the smoke scripts copied),
  run through the shell renderer (``envbuild.render.shell``), the smoke runs themselves left out,
  and those two steps' markers (what a pack's manifest lists: ``envbuild.bundle.envpack``);
* an empty folder for every git checkout of the plan and for the recipe's benchmark working
  folder (a replaced command does not read them).

Say so wherever it is used: the training program of the recipe is not in this environment.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from envbuild.render.steps import step_actions as actions
from envbuild.render.shell import Where, commands, q, shipped


def materialize(plan, files: Path, recipe=None, python: str = sys.executable) -> Path:
    """Build the stand-in at ``plan.prefix``; ``files`` receives envbuild's shipped files."""
    prefix = Path(plan.prefix)
    subprocess.run([python, "-m", "venv", "--without-pip", str(prefix)], check=True, capture_output=True)
    site = next(prefix.glob("lib/python*/site-packages"))
    (site / "envbuild-stand-in.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    ran = [s for s in (plan.env_file(), plan.smoke()) if s is not None]  # in plan order
    acts = [a for s in ran for a in actions(s, plan.prefix) if a.op != "capture"]
    for rel, item in shipped(acts).items():
        dest = files / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(item.read_bytes() if isinstance(item, Path) else item.encode())
    script = "set -e\n" + "\n".join(commands(acts, Where(files=q(str(files)))))
    subprocess.run(["bash", "-c", script], check=True, capture_output=True)
    state = prefix / ".envbuild" / "state"  # the markers of the steps it ran, as a provision leaves them
    state.mkdir(parents=True, exist_ok=True)
    for s in ran:
        (state / f"{s.id}.done").write_text(s.digest + "\n")
    sources = {s.params.name: s.params.dest for s in plan.sources()}
    for dest in sources.values():
        Path(dest).mkdir(parents=True, exist_ok=True)
    cwd = recipe.benchmark.cwd if recipe is not None and recipe.benchmark else None
    if cwd:
        for name, dest in sources.items():
            cwd = cwd.replace("{sources." + name + "}", dest)
        Path(cwd).mkdir(parents=True, exist_ok=True)
    return prefix
