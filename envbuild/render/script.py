"""Plan + actions -> a plain bash script for sites without Ansible. Pure: returns a ``Context``.

    run.sh      set -euo pipefail; one function per plan step (its id and reason as
                comments), run in plan order; ``run.sh STEP_ID...`` runs only those steps
    files/      envbuild's files the steps use (smoke scripts, the node tool and the action
                files it runs: checkouts, patches, wheel builds, smoke runs)

The script is the plan for the node it was planned for (its facts: ``$HOME``, the Python
found there): run it there, as that user. Every action is idempotent as on the Ansible path
(an existing clone is reused, pip skips what is installed), so a rerun after a failure
continues. Commands come from ``envbuild.render.shell``; the node tool runs under the
environment's own Python, which the environment step makes before any step that uses the tool.
"""

from __future__ import annotations

from envbuild import __version__
from envbuild.actions.steps import python_of
from envbuild.render.steps import plan_actions
from envbuild.render.context import Context
from envbuild.render.shell import Where, capture_failures, commands, q, ship_into, shipped

FILES = '"$FILES"'


def where(plan) -> Where:
    """The files folder, and the node tool's Python: the environment's, which the plan makes
    before it checks out, patches, builds or runs anything (the node's own python3 may be older
    than the tool's floor: SLES 15 ships 3.6, and Polaris's recipe Python comes from a module);
    python3 for a plan without one (the container backend's)."""
    env = plan.environment()
    return Where(files=FILES, python=python_of(env.params.prefix) if env is not None else "python3")


def _fn(step_id: str) -> str:
    return "step_" + "".join(c if c.isalnum() else "_" for c in step_id)


def _comment(text: str, prefix: str) -> list[str]:
    import textwrap

    return [prefix + line for line in textwrap.wrap(" ".join(text.split()), 96)]


def render(plan, *, regenerate: str = "") -> Context:
    """``run.sh`` and ``files/`` for ``plan`` (``envbuild.plan.model.Plan``)."""
    pairs = plan_actions(plan)
    files: dict = {}
    lines = ["#!/usr/bin/env bash",
             f"# Provision {plan.recipe} on {plan.target} (host {plan.host}, facts {plan.facts_origin}),",
             f"# rendered by envbuild {__version__} from the plan; lock digest {plan.lock_digest or 'none'}.",
             *([f"# Regenerate: {regenerate}"] if regenerate else []),
             "# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)",
             "set -euo pipefail",
             'FILES="$(cd "$(dirname "$0")" && pwd)/files"',
             "export FILES"]
    ids = []
    at = where(plan)
    for step, acts in pairs:
        ship_into(files, shipped(acts), "files/")
        body = commands(acts, at)
        if any(a.op == "capture" for a in acts):
            body = ["failed=''", *body, capture_failures()]
        if not body:
            body = [":  # nothing to do on this node"]
        lines += ["", f"# step {step.id}: {step.title}", *_comment(step.reason, "# why: "),
                  f"{_fn(step.id)}() {{"]
        for cmd in body:
            first, *rest = cmd.split("\n")
            lines.append("  " + first)
            lines.extend(rest)  # a heredoc body and its delimiter stay at column 0
        lines.append("}")
        ids.append(step.id)
    lines += ["", "STEPS=(" + " ".join(q(i) for i in ids) + ")",
              'if [ "$#" -gt 0 ]; then STEPS=("$@"); fi',
              'n=0',
              'for id in "${STEPS[@]}"; do',
              "  n=$((n + 1))",
              "  fn=\"step_${id//[^a-zA-Z0-9]/_}\"",
              "  if ! declare -F \"$fn\" >/dev/null; then echo \"no step $id\" >&2; exit 2; fi",
              '  echo "==> [$n/${#STEPS[@]}] $id"',
              '  "$fn"',
              "done",
              'echo "==> done"']
    text_files = {k: v for k, v in files.items() if isinstance(v, str)}
    copies = {k: v for k, v in files.items() if not isinstance(v, str)}
    text_files["run.sh"] = "\n".join(lines) + "\n"
    return Context(files=text_files, copies=copies, modes={"run.sh": 0o755})
