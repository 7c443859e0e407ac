"""One entry point for every output format of ``envbuild render``. Pure.

    ansible     inventory.yml + extravars.yml for playbooks/provision.yml, and plan.json
    shell       run.sh + files/ (a node without Ansible; envbuild.render.script)
    dockerfile  a build context (envbuild.render.dockerfile)
    apptainer   a definition file and its files (envbuild.render.apptainer)
    ci          a GitHub Actions workflow (envbuild.render.ci)

The node formats (ansible, shell) plan for a node of the target with the facts given; the
image formats plan for an image (``envbuild.render.image``) whatever the facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions, SEARCH_PATH
from envbuild.plan.model import Plan
from envbuild.plan.resolve import resolve
from envbuild.render.context import Context
from envbuild.render.regenerate import render_command

FORMATS = ("ansible", "shell", "dockerfile", "apptainer", "ci")
IMAGE_FORMATS = ("dockerfile", "apptainer", "ci")


@dataclass(frozen=True)
class Rendered:
    context: Context
    plan: Plan
    feasible: bool
    summary: str
    base: str | None = None  # image formats: the base image


def render(fmt: str, recipe, target, lock, *, lock_text: str | None = None, facts=None,
           base: str | None = None, wheelhouse: str | None = None, prefix: str | None = None,
           connection: dict | None = None, run_dir: str = "run", cache_dir: str = "cache",
           inventory=None, given=None, regenerate: str | None = None) -> Rendered:
    """Render ``recipe`` for ``target`` as ``fmt``. ``facts``: the node's (node formats;
    default: the target's profile). ``wheelhouse``: a folder of wheels (node formats use it as
    is; image formats mount the context's ``wheelhouse/`` there at build time). ``given``: the
    recipe, lock and base as the user named them (``envbuild.render.ci.CiInputs``: the CI
    workflow renders with the same). ``regenerate``: the command a rendered file's header names
    (``envbuild.render.regenerate.render_command`` of what the user gave; default: the recipe
    and target by name)."""
    if fmt not in FORMATS:
        from envbuild.errors import InputError

        raise InputError(f"unknown format {fmt!r}", hint="one of " + ", ".join(FORMATS))
    if fmt in IMAGE_FORMATS:
        from envbuild.render import apptainer, ci, dockerfile
        from envbuild.plan.image import image_plan

        ip = image_plan(recipe, target, lock, lock_text=lock_text, base=base, wheelhouse=bool(wheelhouse),
                        inventory=inventory)
        context = ci.render(ip, given) if fmt == "ci" else \
            {"dockerfile": dockerfile, "apptainer": apptainer}[fmt].render(ip, regenerate)
        return Rendered(context=context, plan=ip.plan, feasible=ip.feasible and not ip.plan.refused(),
                        summary=_summary(ip.plan), base=ip.base.image)

    node = facts if facts is not None else from_target(target)
    res = resolve(recipe, target, node, lock, PlanOptions(prefix=prefix, wheelhouse=wheelhouse,
                                                          host=node.host or target.name,
                                                          inventory=inventory))
    plan = res.plan
    if fmt == "shell":
        from envbuild.render import script

        ctx = script.render(plan, regenerate=regenerate or render_command(recipe.name, target.name, "shell"))
    else:
        from envbuild.render import ansible

        host = plan.host
        out = ansible.render({host: plan}, {host: connection or {"ansible_connection": "local"}},
                             {host: node.path or SEARCH_PATH}, run_dir=run_dir, cache_dir=cache_dir)
        ctx = Context(files={"inventory.yml": out.inventory_text(), "extravars.yml": out.extravars_text(),
                             "plan.json": plan.to_json()})
    return Rendered(context=ctx, plan=plan, feasible=res.feasible and not plan.refused(), summary=_summary(plan))


def _summary(plan) -> str:
    """The preflight's summary, and each step a decision refuses (``Plan.refused``): a render
    says no where `envbuild plan` does (issue 49)."""
    refused = "; ".join(f"{d.subject} refused: {d.reason}" for d in plan.refused())
    return plan.steps[0].params.summary + (f"; {refused}" if refused else "")
