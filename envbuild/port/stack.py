"""The torch / CUDA / Python a ported recipe runs on: the node's own torch where the node
brings one (``node_stacks.yaml``, or a facts file whose pip list holds torch), else the
published torch build closest to the recipe's that supports the node's GPU arch, driver and
Pythons (``torch_builds.yaml``).

    choose_stack(load_recipe("alpa-megatron"), load_target("h100-venv"), facts)
    # Stack(torch='2.11.0', cuda='cu130', python='3.12', node_own=True, ...)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envbuild import cuda_arch as ca
from envbuild.errors import CheckFailed
from envbuild.facts.model import NodeFacts
from envbuild.port.tables import ResolveAsOf, TorchBuild, node_stack, torch_builds
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target
from envbuild.versions import major_minor, split_local, vtuple


@dataclass(frozen=True)
class Stack:
    """What the variant runs on, with the reason and where it is read.

    ``node_own``: the node's torch, preinstalled (a venv with --system-site-packages over it);
    ``build``: the chosen published build otherwise. ``packages``: what the node's Python has
    (canonical name -> version), empty when unknown. ``resolve_as_of``: the day a port to it
    resolves as of (its ``node_stacks.yaml`` row), None when the table gives none.
    """

    torch: str
    cuda: str | None
    python: str
    node_own: bool
    why: str
    source: str
    archs: tuple[str, ...] = ()
    nvcc: str | None = None
    prefix: str | None = None
    build: TorchBuild | None = None
    packages: dict[str, str] = field(default_factory=dict)
    resolve_as_of: ResolveAsOf | None = None

    @property
    def arch(self) -> str | None:
        """The node's newest GPU arch ("9.0"), which arch-specific fixes build for."""
        return self.archs[-1] if self.archs else None

    def label(self) -> str:
        return f"torch {self.torch}" + (f"+{self.cuda}" if self.cuda else "") + f", Python {self.python}"


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _from_facts(facts: NodeFacts) -> Stack | None:
    have = {_norm(k): v for k, v in facts.pip_packages.items()}
    if "torch" not in have or not facts.pythons:
        return None
    version, local = split_local(have["torch"])
    return Stack(torch=version, cuda=local, python=major_minor(facts.pythons[0].version) or facts.pythons[0].version,
                 node_own=True, why=f"the node's own torch {have['torch']} (its pip list, {facts.pythons[0].path})",
                 source=f"facts of {facts.host} (pip list)", archs=tuple(facts.archs), nvcc=facts.nvcc,
                 packages=have)


def _fits(build: TorchBuild, facts: NodeFacts, pythons: list[str]) -> str | None:
    """Why ``build`` does not fit the node, or None."""
    for cc in facts.archs:
        if not ca.binary_runs(build.archs, [], cc):
            return f"no {ca.sm(cc)} kernels"
    if facts.driver_version and vtuple(facts.driver_version) < vtuple(build.driver_min):
        return f"driver {facts.driver_version} < {build.driver_min}"
    dc = ca.driver_cuda(facts.driver_cuda, facts.driver_version)
    if not facts.driver_version and dc and vtuple(dc) < vtuple(build.cuda_version):
        return f"the driver's CUDA {dc} < {build.cuda_version}"
    if not set(pythons) & set(build.pythons):
        return f"no wheel for Python {', '.join(pythons) or '(none on the node)'}"
    return None


def _closest_python(published: str, offered: list[str]) -> str:
    """The offered Python closest to the published one (the newer on a tie)."""
    return min(offered, key=lambda p: (abs(vtuple(p)[1] - vtuple(published)[1]) if vtuple(p)[0] == 3 else 99,
                                       -vtuple(p)[1]))


def _builds_cuda_ext(recipe: Recipe) -> bool:
    apex = recipe.apex
    return bool(apex and "--cuda_ext" in apex.build_options) or any(s.build for s in recipe.sources)


def _from_builds(recipe: Recipe, facts: NodeFacts, offered: list[str]) -> Stack:
    published = split_local(recipe.package("torch").version if recipe.package("torch") else "0")[0]
    tried = [(b, _fits(b, facts, offered)) for b in torch_builds()]
    fit = [b for b, why in tried if why is None]
    if not fit:
        raise CheckFailed("no torch build of envbuild/port/data/torch_builds.yaml fits the node: "
                          + "; ".join(f"{b.torch}+{b.cuda}: {why}" for b, why in tried),
                          hint="add a row for a build that does (torch, CUDA tag, archs, Pythons, driver, source)")
    nvcc_major = vtuple(facts.nvcc)[:1] if facts.nvcc else ()
    if nvcc_major and _builds_cuda_ext(recipe):
        same = [b for b in fit if vtuple(b.cuda_version)[:1] == nvcc_major]
        fit = same or fit
    newer = [b for b in fit if vtuple(b.torch) >= vtuple(published)]
    best = min(newer, key=lambda b: vtuple(b.torch)) if newer else max(fit, key=lambda b: vtuple(b.torch))
    python = _closest_python(recipe.python, [p for p in offered if p in best.pythons])
    why = (f"the published torch build closest to {published} whose kernels run on "
           f"{', '.join(ca.sm(c) for c in facts.archs) or 'the node'}, whose CUDA {best.cuda_version} the driver "
           f"runs and with a wheel for Python {python}")
    if nvcc_major and _builds_cuda_ext(recipe):
        why += f" (CUDA major of the node's nvcc {facts.nvcc}, for the CUDA extensions)"
    return Stack(torch=best.torch, cuda=best.cuda, python=python, node_own=False, why=why, source=best.source,
                 archs=tuple(facts.archs), nvcc=facts.nvcc, build=best,
                 packages={_norm(k): v for k, v in facts.pip_packages.items()})


def choose_stack(recipe: Recipe, target: Target, facts: NodeFacts) -> Stack:
    """See module. CheckFailed when no build of the table fits the node."""
    own = _from_facts(facts)
    if own is not None:
        return own
    row = node_stack(target.name)
    if row is not None:
        return Stack(torch=row.torch, cuda=row.cuda, python=row.python, node_own=True,
                     why=f"the node's own torch {row.torch}+{row.cuda} in {row.prefix} (never reinstalled)",
                     source=row.source, archs=tuple(facts.archs), nvcc=facts.nvcc, prefix=row.prefix,
                     packages={_norm(k): v for k, v in row.packages.items()}, resolve_as_of=row.resolve_as_of)
    offered = [major_minor(p.version) or p.version for p in facts.pythons] or list(target.python)
    return _from_builds(recipe, facts, list(dict.fromkeys(offered)))
