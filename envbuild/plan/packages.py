"""Python requirements for the plan: from the lock when there is one, else from the recipe.

The torch requirement is special: its wheel's CUDA variant is chosen from the node's facts
(``cuda: auto``) or fixed by the recipe, and comes from the index that carries it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envbuild.facts.model import NodeFacts
from envbuild.lock.schema import LockedPackage as LockEntry
from envbuild.lock.schema import normalize as norm
from envbuild.plan.model import Decision
from envbuild.plan.params import Requirement
from envbuild.recipes.schema import Package, Recipe


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str  # exact version, or a specifier when unlocked
    hashes: tuple[str, ...] = ()
    index_url: str | None = None
    find_links: str | None = None
    local_tag: str | None = None  # "cu111", "cpu"
    env: dict[str, str] = field(default_factory=dict)
    from_wheelhouse: bool = False  # the lock took this distribution from a --wheelhouse
    replaces: str | None = None  # a stand-in for the recipe's build (lock ``replaces``)

    @property
    def requirement(self) -> str:
        v = self.version
        if v and v[0].isdigit():
            return f"{self.name}=={v}"
        return f"{self.name}{v}"

    def as_requirement(self):
        return Requirement(name=self.name, version=self.version, requirement=self.requirement,
                           hashes=list(self.hashes), index_url=self.index_url,
                           find_links=self.find_links)


def _from_recipe(pkg: Package) -> LockedPackage:
    index_url = pkg.index if pkg.index_kind == "index-url" else None
    find_links = pkg.index if pkg.index_kind == "find-links" else None
    return LockedPackage(name=pkg.name, version=pkg.version, index_url=index_url,
                         find_links=find_links, env=dict(pkg.env))


def _lock_entries(lock: object) -> list:
    return list(getattr(lock, "packages", []) or [])


def _from_lock_entry(entry: LockEntry, recipe: Recipe) -> LockedPackage:
    """A lock entry (envbuild.lock.schema.LockedPackage) as a pip requirement."""
    name = entry.name
    declared = recipe.package(name)
    dist = getattr(entry, "dist", None)
    hashes = (dist.sha256,) if dist is not None and getattr(entry, "verified", False) else ()
    source = getattr(entry, "source", "pypi") or "pypi"
    index_url = find_links = None
    replaces = getattr(entry, "replaces", None)
    if declared is not None and declared.index and not replaces:
        index_url = declared.index if declared.index_kind == "index-url" else None
        find_links = declared.index if declared.index_kind == "find-links" else None
    elif source.startswith("http") and "pypi.org" not in source:
        index_url = source
    version = str(entry.version)
    local = version.split("+", 1)[1] if "+" in version else None
    env = dict(declared.env) if declared else {}
    for requirer in getattr(entry, "required_by", None) or []:  # a source's dependency builds
        kind, _, component = requirer.partition(":")
        src = recipe.source(component) if kind in ("source", "build") else None
        env.update(src.env if src is not None else {})  # with the source's install variables
    return LockedPackage(name=name, version=version, hashes=hashes, index_url=index_url,
                         find_links=find_links, local_tag=local, env=env,
                         from_wheelhouse=bool(getattr(entry, "from_wheelhouse", False)), replaces=replaces)


def locked_packages(recipe: Recipe, lock: object | None) -> list[LockedPackage]:
    """Packages to pip-install, in lock order (dependencies first), skipping preinstalled ones."""
    preinstalled = {p.name.lower() for p in recipe.packages if p.preinstalled}
    if lock is not None and _lock_entries(lock):
        out = []
        for entry in _lock_entries(lock):
            if entry.name.lower() in preinstalled:
                continue
            if getattr(entry, "provided_by", None):
                continue
            out.append(_from_lock_entry(entry, recipe))
        return out
    return [_from_recipe(p) for p in recipe.packages if not p.preinstalled]


def torch_closure(lock: object | None) -> set[str]:
    """Normalized names of the locked packages only torch needs (directly or through each
    other), and that the recipe does not ask for itself: they change when torch does."""
    entries = {norm(e.name): e for e in _lock_entries(lock)} if lock is not None else {}
    closure: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, e in entries.items():
            req = {norm(r) for r in (getattr(e, "required_by", None) or [])}
            if name in closure or name == "torch" or "recipe" in req:
                continue
            if req and req <= closure | {"torch"}:
                closure.add(name)
                changed = True
    return closure


def torch_requirement(recipe: Recipe, facts: NodeFacts, lock: object | None,
                      decisions: list[Decision]) -> LockedPackage | None:
    """torch with its CUDA variant decided for this node, or None when not installed by us."""
    declared = recipe.package("torch")
    if declared is None or declared.preinstalled:
        return None
    locked = next((p for p in locked_packages(recipe, lock) if p.name.lower() == "torch"), None)
    base = locked or _from_recipe(declared)
    tag = declared.cuda
    if tag == "auto":
        from envbuild.compat.torch_wheels import choose_variant

        tag, reason = choose_variant(declared.version, "auto", facts)
        decisions.append(Decision(subject="torch-variant", outcome=tag, reason=reason))
    elif tag:
        decisions.append(Decision(subject="torch-variant", outcome=tag,
                                  reason=f"fixed by the recipe: {declared.why}"))
    if base.replaces and tag == "cpu":  # the lock's CPU stand-in, as locked (hash-checked)
        decisions.append(Decision(subject="torch-stand-in", outcome=f"torch {base.version} from PyPI",
                                  reason=f"replaces torch {base.replaces}; PyPI's build runs on CPU"))
        return base
    version = base.version.split("+", 1)[0]
    if tag and version[:1].isdigit() and tag != "none":
        version = f"{version}+{tag}"
    hashes = base.hashes if (base.local_tag or None) == tag else ()
    return LockedPackage(name="torch", version=version, hashes=hashes, index_url=base.index_url,
                         find_links=base.find_links, local_tag=tag, env=base.env,
                         from_wheelhouse=base.from_wheelhouse)


def downgrades(packages: list[LockedPackage], facts: NodeFacts) -> list[Decision]:
    """A warning per locked package that the node's Python already has at a newer version
    (``facts.pip_packages``): the environment sees the node's packages (system site packages)
    and the locked, older one shadows it there. Said, never silent (issue 49: typing-extensions
    went from the node's 4.16.0 to an older lock pin without a word)."""
    from packaging.version import InvalidVersion, Version

    have = {norm(k): v for k, v in facts.pip_packages.items()}
    out = []
    for p in packages:
        node = have.get(norm(p.name))
        if node is None or not p.version[:1].isdigit():
            continue
        try:
            older = Version(p.version.split("+", 1)[0]) < Version(node.split("+", 1)[0])
        except InvalidVersion:
            continue
        if older:
            out.append(Decision(subject=f"downgrade:{p.name}", outcome=f"{node} -> {p.version}",
                                reason=f"warning: {facts.host}'s Python has {p.name} {node}; the environment "
                                       f"installs the locked {p.version}, which shadows it there. Pin "
                                       f"{p.name} in the recipe (or mark it preinstalled) to keep the node's"))
    return out
