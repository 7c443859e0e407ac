"""The launch cases whose rendered scripts and manifests are golden files (tests/golden/launch/,
``CASES``: name -> recipe, target, launch options) and how a case is rendered without a
provisioned run (``plan_for``, ``render``): for the launch tests and the recipe tests that read a
rendered launch."""

from __future__ import annotations

from envbuild.launch import LaunchOptions, render_launch
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.ib_inventory import profile_facts

IMAGE = "registry.example.org/envbuild/megatronapp:rtx4090-pod"  # pushed there (the pods pull it)
CASES = {  # name: (recipe, target, options)
    "alpa-megatron--slurm--slurm": ("alpa-megatron", "slurm", dict(scheduler="slurm")),
    "alpa-megatron--slurm--slurm-8gpu-2nodes": ("alpa-megatron", "slurm",
                                                dict(scheduler="slurm", variant="8gpu", nodes=2)),
    "alpa-megatron--slurm--slurm-smoke": ("alpa-megatron", "slurm",
                                          dict(scheduler="slurm", nodes=2, gpus_per_node=2, smoke_only=True)),
    "alpa-megatron--azure-nd96--local": ("alpa-megatron", "azure-nd96", dict(scheduler="local")),
    "opt-175b-azure--azure-nd96--slurm": ("opt-175b-azure", "azure-nd96", dict(scheduler="slurm")),
    "opt-175b-azure--azure-nd96--slurm-smoke": ("opt-175b-azure", "azure-nd96",
                                                dict(scheduler="slurm", smoke_only=True, time_limit="00:10:00")),
    "megatron-deepspeed-slurm--slurm--slurm": ("megatron-deepspeed-slurm", "slurm", dict(scheduler="slurm")),
    "megatron-deepspeed-slurm--slurm--slurm-multi-node": ("megatron-deepspeed-slurm", "slurm",
                                                          dict(scheduler="slurm", variant="multi-node")),
    "megatron-deepspeed-slurm--slurm--slurm-multi-node-smoke": (
        "megatron-deepspeed-slurm", "slurm",
        dict(scheduler="slurm", variant="multi-node", smoke_only=True, no_container=True, gpus_per_node=2)),
    "polaris-megatron-deepspeed--polaris--pbs": ("polaris-megatron-deepspeed", "polaris",
                                                 dict(scheduler="pbs", account="myproject", partition="debug")),
    "polaris-megatron-deepspeed--polaris--pbs-2nodes": ("polaris-megatron-deepspeed", "polaris",
                                                        dict(scheduler="pbs", nodes=2, account="myproject",
                                                             partition="prod")),
    "polaris-megatron-deepspeed--polaris--pbs-smoke": ("polaris-megatron-deepspeed", "polaris",
                                                       dict(scheduler="pbs", nodes=2, smoke_only=True,
                                                            account="myproject", partition="debug")),
    "megatronapp--rtx4090-pod--k8s": ("megatronapp", "rtx4090-pod", dict(scheduler="k8s", container_image=IMAGE)),
    "megatronapp--rtx4090-pod--k8s-two-pods": ("megatronapp", "rtx4090-pod",
                                               dict(scheduler="k8s", variant="two-pods", container_image=IMAGE)),
    "megatronapp--rtx4090-pod--k8s-two-pods-jobset": ("megatronapp", "rtx4090-pod",
                                                      dict(scheduler="k8s", variant="two-pods", container_image=IMAGE,
                                                           k8s_workload="jobset")),
    "megatronapp--rtx4090-pod--k8s-two-pods-trainjob": ("megatronapp", "rtx4090-pod",
                                                        dict(scheduler="k8s", variant="two-pods",
                                                             container_image=IMAGE, k8s_workload="trainjob")),
    "megatronapp--rtx4090-pod--k8s-two-pods-pytorchjob": ("megatronapp", "rtx4090-pod",
                                                          dict(scheduler="k8s", variant="two-pods",
                                                               container_image=IMAGE, k8s_workload="pytorchjob")),
    "megatronapp--rtx4090-pod--k8s-smoke": ("megatronapp", "rtx4090-pod",
                                            dict(scheduler="k8s", nodes=2, smoke_only=True, container_image=IMAGE)),
    "cpu-reference--local--local": ("cpu-reference", "local", dict(scheduler="local")),
}


def plan_for(recipe, target):
    """The plan a launch reads without a provisioned run: the image's for a container recipe
    (run in its container), else the node plan from the target profile (no lock)."""
    if recipe.environment.kind == "container":
        from envbuild.plan.image import image_plan

        from envbuild.plan.placeholders import inventory_values

        return image_plan(recipe, target, None, inventory=inventory_values([profile_facts(target)])).plan
    return resolve(recipe, target, profile_facts(target), None, PlanOptions(host=target.name)).plan


def render(name: str):
    recipe, target, kw = CASES[name]
    rec, tgt = load_recipe(recipe), load_target(target)
    return render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(**kw))
