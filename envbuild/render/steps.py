"""A plan's steps as actions, image steps included: what the executors' renderers (Ansible, the
shell script, the live log) take. Pure.

Every step kind but one becomes actions in ``envbuild.actions.steps``. An ``image`` step carries
the image's plan (``envbuild.plan.params.ImagePlan``), not its build context: the context is
rendered here, by the same renderer as ``envbuild render --format dockerfile``
(``envbuild.render.dockerfile``), and written on the node by the step's actions
(``envbuild.actions.steps.image_actions``), envbuild's own files by asset name; from a
bundle that carries its base image, the engine loads it first (``<engine> load -i``).

    >>> from envbuild.plan.model import Plan
    >>> plan_actions(Plan(recipe="r", target="t", host="h", prefix="/p", backend="venv"))
    []
"""

from __future__ import annotations

from envbuild.actions.model import Run
from envbuild.actions.steps import actions, engine_env, image_actions
from envbuild.plan.params import ImageParams
from envbuild.shipped import asset_of


def step_actions(step, prefix: str) -> list:
    """The actions of one plan step; an image step's with its rendered build context."""
    if not isinstance(step.params, ImageParams):
        return actions(step, prefix)
    # imported here, as plan.resolve imports the container planner: only a container node's plan
    # needs the image renderers, and every provision (a no-op's too) loads this module
    from envbuild.render import dockerfile

    p = step.params
    ctx = dockerfile.render(p.image)
    modes = {rel: f"{mode:04o}" for rel, mode in ctx.modes.items()}
    acts = image_actions(p, dict(ctx.files), modes, {rel: asset_of(path) for rel, path in ctx.copies.items()})
    if p.base_archive:  # the base image from the node's copy of a bundle: loaded, so the build never pulls it
        acts = [Run(argv=[p.engine.name, "load", "-i", p.base_archive], env=engine_env(p.engine)), *acts]
    return acts


def plan_actions(plan) -> list[tuple[object, list]]:
    """``[(step, actions)]`` for a whole plan."""
    return [(s, step_actions(s, plan.prefix)) for s in plan.steps]
