"""How to enter a provisioned environment: the one shell command a user runs after a provision.

A venv, conda or module-venv plan writes ``<prefix>/.envbuild/env.sh`` (the ``env-file``
step, ``envbuild.actions.steps.env_file_text``: ``VIRTUAL_ENV``, ``PATH`` and the recipe's and
target's variables); sourcing it is entering the environment, as ``envbuild launch``'s task
scripts do (``envbuild.launch.job``). A container plan's environment is its image (the
Dockerfile's ``ENV`` holds the same variables): a shell in the image, through pyxis when the
plan imports it for Slurm (``image-import``), else through the node's engine. Pure.

    >>> from envbuild.plan.model import Plan, Step
    >>> from envbuild.plan.params import EnvFileParams
    >>> plan = Plan(recipe="r", target="t", host="n", prefix="/opt/e", backend="venv", steps=[
    ...     Step(id="env-file", title="env", params=EnvFileParams(path="/opt/e/.envbuild/env.sh", vars={}))])
    >>> enter_command(plan)
    '. /opt/e/.envbuild/env.sh'
"""

from __future__ import annotations

import shlex

from envbuild.plan.model import Plan


def word(path: str) -> str:
    """``path`` as one shell word; a leading ``~/`` (a plan made without the node's home, as
    from a target profile) stays unquoted, so that the node's shell expands it."""
    return "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)


def enter_command(plan: Plan) -> str | None:
    """The command that gives a shell the plan's environment; None when the plan makes none
    (a preflight-only plan)."""
    by_kind = {s.kind: s.params for s in plan.steps}
    if "env_file" in by_kind:
        return f". {word(by_kind['env_file'].path)}"
    if "image_import" in by_kind:
        return f"srun --container-image={word(by_kind['image_import'].path)} --pty bash"
    if "image" in by_kind:
        image = by_kind["image"]
        return f"{image.engine.name} run --rm -it {shlex.quote(image.tag)} bash"
    return None
