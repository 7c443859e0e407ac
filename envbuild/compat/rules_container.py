"""Rows of the container backend (``provision --backend container``, the default of the
container recipes): the node builds the image with its own engine, and a Slurm target with
pyxis needs enroot to import it.

They are checked only when the plan builds the image on the node (``envbuild.plan.resolve.
check_facts(..., backend="container")``), on top of ``RULES``: a node that runs a container
recipe without building its image (``envbuild launch --no-container``) does not need them.

    >>> [r.id for r in CONTAINER_RULES]
    ['image-engine-missing', 'enroot-missing-for-pyxis']
"""

from __future__ import annotations

from envbuild.compat.context import Context
from envbuild.compat.rule import Rule

BUILD_ENGINES = ("podman", "docker")  # the engines envbuild builds with, preferred first


def build_engine(engines: dict[str, str]) -> str | None:
    """The engine that builds the image on a node with ``engines`` (facts), or None."""
    return next((e for e in BUILD_ENGINES if e in engines), None)


def pyxis(target) -> bool:
    """The target runs jobs in containers through pyxis (``srun --container-image``)."""
    return "pyxis" in (target.container_runtime or "").lower()


def has_enroot(engines: dict[str, str]) -> bool:
    """enroot among the facts (the profile writes ``enroot+pyxis``, a node ``enroot``)."""
    return any("enroot" in name.lower() for name in engines)


def _engine(ctx: Context) -> str | None:
    engines = ctx.facts.container_engines
    if build_engine(engines):
        return None
    found = ", ".join(sorted(engines)) or "none"
    return (f"the image of {ctx.recipe.name} is built on {ctx.facts.host} with podman or docker, "
            f"and neither is on its PATH (container engines found: {found})")


def _enroot(ctx: Context) -> str | None:
    if not pyxis(ctx.target) or has_enroot(ctx.facts.container_engines):
        return None
    return (f"target {ctx.target.name} runs the job with srun --container-image (pyxis), which takes "
            f"the image imported by enroot as a squashfs; {ctx.facts.host} has no enroot on its PATH")


CONTAINER_RULES: list[Rule] = [
    Rule("image-engine-missing", "error", "the container backend builds the image on the node",
         "envbuild builds the recipe's image where it runs (its context rendered from the plan), "
         "with the node's podman or docker",
         "https://docs.podman.io/en/latest/markdown/podman-build.1.html",
         "install podman (or docker) on the node, or build the image elsewhere with "
         "`envbuild render --format dockerfile` and run the recipe from it", _engine),
    Rule("enroot-missing-for-pyxis", "error", "pyxis cannot run an image that enroot did not import",
         "pyxis' --container-image takes an enroot URI (registry) or a squashfs file; a locally "
         "built image becomes one with `enroot import podman://IMAGE` (or dockerd://)",
         "https://github.com/NVIDIA/enroot/blob/master/doc/cmd/import.md",
         "install enroot on the node (pyxis needs it on every compute node anyway)", _enroot),
]
