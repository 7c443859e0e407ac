"""The state of one port (``Port``): the published recipe (model and raw data), the node, the
stack, the variant's data as it is composed, its deviations and undecided entries, and what the
trees showed (``Found``); with the helpers every step uses (a tree opened in the mirror).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envbuild import cuda_arch as ca
from envbuild import gitsrc
from envbuild.draft.gitread import Tree
from envbuild.facts.model import NodeFacts
from envbuild.port import scan as sc
from envbuild.port.stack import Stack
from envbuild.port.tables import Fix, canonical, fixes
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target
from envbuild.versions import pinned

TEST = "tests/draft_port/test_port.py::"
FIX_TEST = "tests/draft_port/test_port_fixes.py::test_fix_row_example"


@dataclass
class Found:
    """What the trees showed: patches by component, the readable trees, what could not be read."""

    hits: list[sc.Hit] = field(default_factory=list)
    trees: dict[str, Tree] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)  # component -> why


@dataclass
class Port:
    """One port in progress: the published recipe (model and raw data), the node, the stack."""

    recipe: Recipe
    raw: dict
    target: Target
    facts: NodeFacts
    stack: Stack
    mirror: Path | None
    data: dict = field(default_factory=dict)
    deviations: list[dict] = field(default_factory=list)
    undecided: list[dict] = field(default_factory=list)
    found: Found = field(default_factory=Found)
    notes: list[str] = field(default_factory=list)

    # -- helpers -------------------------------------------------------------------------------
    def deviate(self, id_: str, published: str, problem: str, instead: str, source: str,
                handled_by: list[str], test: list[str]) -> None:
        ids = {d["id"] for d in self.deviations}
        base, n = id_, 2
        while id_ in ids:
            id_, n = f"{base}-{n}", n + 1
        self.deviations.append({"id": id_, "published": published, "problem": problem, "instead": instead,
                                "source": {"url": source}, "handled_by": handled_by, "test": test})

    def leave(self, field_path: str, why: str) -> None:
        if not any(u["field"] == field_path and u["why"] == why for u in self.undecided):
            self.undecided.append({"field": field_path, "why": why})

    def versions(self) -> dict[str, str | None]:
        """The stack's versions the fix rows' ``when`` reads: torch, Python, nvcc, the node's
        arch, and numpy/setuptools/omegaconf as the variant has them (the node's, or a pin)."""
        out: dict[str, str | None] = {"torch": self.stack.torch, "python": self.stack.python,
                                      "nvcc": self.stack.nvcc, "arch": self.stack.arch}
        for name in ("numpy", "setuptools", "omegaconf"):
            pkg = next((p for p in self.data.get("packages", []) if p["name"].lower() == name), None)
            out[name] = pinned(str(pkg["version"])) if pkg else self.stack.packages.get(name)
        return out

    def installed(self) -> frozenset[str]:
        """Every package the variant has (canonical names): the node's, its pins, its sources."""
        names = {*self.stack.packages, *(p["name"] for p in self.data.get("packages", [])),
                 *(s["name"] for s in self.data.get("sources", []))}
        return frozenset(canonical(n) for n in names)

    def holding_fixes(self) -> list[Fix]:
        return [f for f in fixes() if f.holds(self.versions(), self.stack.node_own, self.installed())]


def arch_suffix(stack: Stack) -> str:
    """``sm90`` for the node's newest GPU arch, ``cpu`` without GPUs."""
    return ca.sm(stack.arch).replace("_", "") if stack.arch else "cpu"


def published_env(recipe: Recipe) -> str:
    env = recipe.environment
    return env.base_image or env.conda_module or f"the published {env.kind} environment"


def open_tree(p: Port, component: str, url: str, sha: str | None) -> Tree | None:
    if p.mirror is None:
        p.found.unread[component] = "no --git-mirror given"
        return None
    repo = gitsrc.mirror_path(url, p.mirror)
    if repo is None:
        p.found.unread[component] = f"no mirror of {url} under {p.mirror}"
        return None
    if not sha or not gitsrc.has_commit(repo, sha):
        p.found.unread[component] = f"{(sha or 'its ref')[:12]} is not in the mirror {repo}"
        return None
    return Tree(repo, gitsrc.resolve_ref(repo, sha))


