"""What a node provisioned from a bundle still needs the network for. Pure: read from plans.

A bundle carries every locked file, pinned commit and data file its node plans take (packing
fails otherwise: ``envbuild.bundle.pack``), so at a plan's own level these never need the
network. What no bundle carries, or this one does not:

- ``base-image``: a container recipe's environment is made inside its base image (the plan's
  ``environment`` step, backend ``container``: a pod of that image), and the container backend
  builds FROM it (an ``image`` step); the node's engine pulls it unless the bundle carries it
  (``--image-tar``: the image as its engine saved it, loaded on the node instead).
- ``apt``: system packages (a ``system_packages`` step, or the apt packages an image build adds).
- ``conda-channel``: a conda environment's packages from a channel that is not a local folder.
- inside an image build (an ``image`` step's nested plan): pip from an index (not ``--no-index``
  from the context's wheels), a git source cloned from its remote, a data file from its URL.

``needs(plans, images)`` lists each once (the first step that needs it named), in plan order;
empty means offline.

    >>> from envbuild.plan.model import Plan, Step
    >>> from envbuild.plan.params import SystemPackagesParams
    >>> plan = Plan(recipe="r", target="t", host="n1", prefix="/p", backend="venv", steps=[
    ...     Step(id="system-packages", title="", params=SystemPackagesParams(packages=["strace"]))])
    >>> [n.line() for n in needs([plan])][0][:42]
    'apt strace (n1: system-packages): apt-get '
"""

from __future__ import annotations

from typing import Iterable, Iterator

from envbuild.bundle.manifest import NetworkNeed
from envbuild.plan.params import (DataParams, EnvironmentParams, GitSourceParams, ImageParams, PipInstallParams,
                                  PipToolingParams, SystemPackagesParams)

PYPI = "https://pypi.org/simple"
IMAGE_TAR_FIX = ("carry it: --image-tar FILE, the image as its engine saved it "
                 "(podman save -o FILE IMAGE, or docker save -o FILE IMAGE)")
APT_WHY = "apt-get installs them from the distribution's mirrors; no bundle carries apt packages"
APT_FIX = "install them on the nodes beforehand (a site image), or give the nodes an apt mirror"


def needs(plans: Iterable, images: Iterable[str] = ()) -> list[NetworkNeed]:
    """Every thing ``plans`` still need the network for, given the base images carried."""
    carried = set(images)
    out: list[NetworkNeed] = []
    seen: set[tuple[str, str]] = set()
    for plan in plans:
        for step in plan.steps:
            for need in _step(step, carried):
                if (need.kind, need.what) not in seen:
                    seen.add((need.kind, need.what))
                    out.append(need.model_copy(update={"step": f"{plan.host}: {step.id}"}))
    return out


def base_images(plans: Iterable) -> list[str]:
    """The base images ``plans`` run in or build from (a container recipe's), each once."""
    out: list[str] = []
    for plan in plans:
        for step in plan.steps:
            p = step.params
            name = (p.base_image if isinstance(p, EnvironmentParams) and p.backend == "container"
                    else p.base if isinstance(p, ImageParams) else None)
            if name and name not in out:
                out.append(name)
    return out


def _step(step, carried: set[str]) -> Iterator[NetworkNeed]:
    p = step.params
    if isinstance(p, SystemPackagesParams):
        yield NetworkNeed(kind="apt", what=" ".join(p.packages), why=APT_WHY, fix=APT_FIX)
    elif isinstance(p, EnvironmentParams):
        if p.backend == "container" and p.base_image and p.base_image not in carried:
            yield NetworkNeed(kind="base-image", what=p.base_image, fix=IMAGE_TAR_FIX,
                              why="the environment is made inside a container of this image (a pod of it): "
                                  "the node's engine pulls it from its registry unless it is loaded from the bundle")
        if p.backend == "conda" and (p.conda_channel is None or "://" in p.conda_channel):
            yield NetworkNeed(kind="conda-channel", what=p.conda_channel or "conda-forge",
                              why="the conda environment's packages come from this channel",
                              fix="a channel folder on the nodes (--conda-channel DIR)")
    elif isinstance(p, ImageParams):
        if p.base not in carried:
            yield NetworkNeed(kind="base-image", what=p.base, fix=IMAGE_TAR_FIX,
                              why="the node's engine builds the image FROM it and pulls it unless it is "
                                  "loaded from the bundle")
        inner = [p.image.tooling] if p.image.tooling is not None else []
        yield from _image_build([*inner, *p.image.plan.steps])


def _image_build(steps: list) -> Iterator[NetworkNeed]:
    """What an image build fetches itself (its RUN steps: the bundle's files are not in its context)."""
    for s in steps:
        p = s.params
        if isinstance(p, SystemPackagesParams):
            yield NetworkNeed(kind="apt", what=" ".join(p.packages), why=f"the image build's {s.id}: {APT_WHY}",
                              fix="a base image that has them")
        elif isinstance(p, (PipToolingParams, PipInstallParams)) and not p.no_index and p.requirements:
            index = getattr(p, "index_url", None) or PYPI
            yield NetworkNeed(kind="pip-index", what=index,
                              why=f"the image build's {s.id} installs {len(p.requirements)} package(s) from it",
                              fix="provision from the bundle: the image then installs --no-index from its wheels")
        elif isinstance(p, GitSourceParams):
            yield NetworkNeed(kind="git-remote", what=p.fetch_url,
                              why=f"the image build clones {p.name} from it (a bundle's repositories are not "
                                  "in an image's build context)")
        elif isinstance(p, DataParams):
            for f in p.files:
                yield NetworkNeed(kind="data-url", what=f.url,
                                  why=f"the image build (or its prepare.sh) fetches {f.name} from it")
