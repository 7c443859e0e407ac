"""The context a compatibility rule looks at: recipe, target, node facts, chosen torch variant."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from envbuild.compat import commits
from envbuild.compat.torch_wheels import TorchWheel, choose_variant, find, variants
from envbuild.cuda_arch import driver_cuda, min_driver_for
from envbuild.facts.model import NodeFacts
from envbuild.recipes.schema import GitSource, Package, Recipe
from envbuild.targets.schema import Target
from envbuild.versions import split_local, cuda_of_tag


@dataclass(frozen=True)
class TorchPick:
    """The torch variant a recipe gets on a node: ``1.8.2`` + ``cu111`` and why."""

    package: Package
    version: str
    tag: str
    reason: str
    row: TorchWheel | None  # None: version or variant not in the table
    known_version: bool  # the version appears in the table at all

    @property
    def cuda(self) -> str | None:
        return self.row.cuda if self.row else cuda_of_tag(self.tag)

    @property
    def label(self) -> str:
        if self.tag == "pypi":
            return self.version
        return f"{self.version} ({self.tag})" if "+" in self.version else f"{self.version}+{self.tag}"


@dataclass
class Context:
    """Everything a rule predicate may read. Built once per (recipe, target, node)."""

    recipe: Recipe
    target: Target
    facts: NodeFacts
    torch: TorchPick | None = None
    notes: list[str] = field(default_factory=list)

    # -- recipe views -------------------------------------------------------------------------
    @property
    def container(self) -> bool:
        return self.recipe.environment.kind == "container"

    @property
    def apex(self) -> GitSource | None:
        return self.recipe.apex

    @property
    def apex_options(self) -> list[str]:
        return list(self.apex.build_options) if self.apex else []

    @cached_property
    def cuda_ext_reasons(self) -> list[str]:
        """Why this recipe compiles CUDA code on the node (empty: it does not)."""
        out = []
        for src in self.recipe.sources:
            opts = " ".join(src.build_options)
            if "--cuda_ext" in opts or src.env.get("APEX_CUDA_EXT") == "1":
                out.append(f"{src.name} is built with --cuda_ext")
            elif src.env.get("BUILD_CUDA_EXTENSIONS") == "1" or src.env.get("DS_BUILD_OPS") == "1":
                out.append(f"{src.name} builds CUDA extensions ({opts or 'env'})")
            elif commits.is_b31e129_megatron(src) or commits.is_fairseq_v2(src) or commits.is_fairseq_v3(src):
                out.append(f"{src.name} JIT-compiles Megatron fused kernels at startup")
        return out

    @property
    def builds_cuda(self) -> bool:
        return bool(self.cuda_ext_reasons) and not self.container

    def sources_where(self, pred) -> list[GitSource]:
        return [s for s in self.recipe.sources if pred(s)]

    # -- node views ---------------------------------------------------------------------------
    @property
    def node_driver_cuda(self) -> str | None:
        return driver_cuda(self.facts.driver_cuda, self.facts.driver_version)

    @property
    def node_driver(self) -> tuple[str | None, str]:
        """(driver version or its lower bound, how it is known) for minor-compatibility checks."""
        if self.facts.driver_version:
            return self.facts.driver_version, f"driver {self.facts.driver_version}"
        bound = min_driver_for(self.facts.driver_cuda)
        return bound, f"the driver (version unknown; supports CUDA {self.facts.driver_cuda})"

    @property
    def gpu_names(self) -> dict[str, str]:
        """compute capability -> a GPU model name having it."""
        return {g.compute_capability: g.name for g in self.facts.gpus}

    def all_env(self) -> dict[str, str]:
        env = dict(self.recipe.env)
        if self.recipe.benchmark:
            env.update(self.recipe.benchmark.env)
        for src in self.recipe.sources:
            env.update(src.env)
        return env


def pick_torch(recipe: Recipe, facts: NodeFacts) -> TorchPick | None:
    """Resolve the recipe's torch package against the node (None: recipe has no torch)."""
    pkg = recipe.package("torch")
    if pkg is None:
        return None
    base, _ = split_local(pkg.version)
    if "a0+" in pkg.version:  # NGC-style source builds keep their local part
        base = pkg.version.strip().removeprefix("==")
    try:
        tag, reason = choose_variant(pkg.version, pkg.cuda, facts)
    except LookupError as exc:
        tag, reason = (pkg.cuda or "pypi"), str(exc)
    return TorchPick(package=pkg, version=base, tag=tag, reason=reason, row=find(base, tag),
                     known_version=bool(variants(base)))


def build_context(recipe: Recipe, target: Target, facts: NodeFacts) -> Context:
    """The rule context for one node; the torch variant is chosen here, once."""
    return Context(recipe=recipe, target=target, facts=facts, torch=pick_torch(recipe, facts))
