"""After a provision, envbuild says how to enter the environment (``envbuild.plan.enter``): the
env file the plan's ``env-file`` step writes, else a shell in the plan's image. Each shipped
plan (the golden plans of tests/plan/test_plan_build.py) is read here; the real provisions that
print the line and put it in ``--json``'s result line, and whose line is then run, are
tests/cli/test_cli_progress.py and tests/provision/test_provision_modes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.plan.enter import enter_command
from envbuild.plan.model import Plan
from support import paths

GOLDEN = sorted((paths.GOLDEN / "plans").glob("*.json"))


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_every_shipped_plan_says_how_to_enter_its_environment(path: Path) -> None:
    plan = Plan.model_validate_json(path.read_text())
    command = enter_command(plan)
    steps = {s.kind: s.params for s in plan.steps}
    if "image" in steps:  # the container backend on a node: the plan builds the image there
        image = steps["image"]
        if "image_import" in steps:  # a Slurm target with pyxis runs jobs in the imported squashfs
            assert command == f"srun --container-image={steps['image_import'].path} --pty bash"
        else:
            assert command == f"{image.engine.name} run --rm -it {image.tag} bash"
    else:  # a venv, conda or module environment, or a container recipe planned inside its image
        assert command == f". {plan.prefix}/.envbuild/env.sh" == f". {steps['env_file'].path}"


def test_a_plan_refused_by_preflight_has_nothing_to_enter() -> None:
    plan = Plan.model_validate_json(GOLDEN[0].read_text())
    assert enter_command(plan.model_copy(update={"steps": plan.steps[:1]})) is None


def test_a_prefix_with_a_space_is_quoted() -> None:
    plan = Plan.model_validate_json(next(p for p in GOLDEN if "cpu" in p.name or "--uv" not in p.name).read_text())
    env = plan.env_file()
    moved = env.model_copy(update={"params": env.params.model_copy(update={"path": "/my env/.envbuild/env.sh"})})
    steps = [moved if s is env else s for s in plan.steps]
    assert enter_command(plan.model_copy(update={"steps": steps})) == ". '/my env/.envbuild/env.sh'"
