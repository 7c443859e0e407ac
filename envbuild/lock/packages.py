"""Sort the recipe's packages into what uv resolves and what the lock records as given.

* ``preinstalled``: provided by the base image or module; recorded as provided-by, excluded
  from resolution (so nothing else pulls a second copy from PyPI).
* a non-PyPI index (the PyTorch LTS page): resolved through uv when the index answers or a
  ``--wheelhouse`` holds the project; otherwise recorded ``verified: false`` and excluded.
* everything else: resolved from PyPI for the target's Python and platform.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from packaging.version import InvalidVersion, Version

from envbuild.compat.torch_wheels import choose_variant
from envbuild.facts.profile import from_target
from envbuild.fsio import sha256_file
from envbuild.lock.indexes import cp_wheel_on_pypi, is_pypi, pypi_cp_wheel, pypi_versions
from envbuild.lock.indexes import unreachable, wheelhouse_projects
from envbuild.lock.schema import Dist, FromWheelhouse, LockedPackage, StandIn, normalize
from envbuild.lock.standins import row_for, stand_in
from envbuild.lock.upstream import upstream
from envbuild.lock.uvresolve import Resolved
from envbuild.recipes.schema import Package, Recipe
from envbuild.targets.schema import Target

Progress = Callable[[str], None]


@dataclass
class Sorted:
    """The outcome of sorting: uv's inputs plus the entries that are recorded as they are."""

    requirements: list[str] = field(default_factory=list)
    requested: dict[str, str] = field(default_factory=dict)  # normalized name -> recipe spec
    excludes: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    extra_indexes: list[str] = field(default_factory=list)
    given: list[LockedPackage] = field(default_factory=list)  # preinstalled + unverified
    no_build: list[tuple[str, str]] = field(default_factory=list)  # (name, exact version)
    env: dict[str, str] = field(default_factory=dict)
    replaces: dict[str, str] = field(default_factory=dict)  # normalized name -> what it stands in for
    indexes: dict[str, tuple[str, str]] = field(default_factory=dict)  # normalized name -> (index, kind)


def is_exact(version: str) -> bool:
    """``"1.8.2"`` or ``"1.8.2+cu111"`` (a single version, not a specifier)."""
    try:
        Version(version.strip())
    except InvalidVersion:
        return False
    return True


def requirement(name: str, version: str) -> str:
    """A requirement line: exact version -> ``name==v``, specifier -> ``name<spec>``, ``*`` -> name."""
    v = version.strip()
    if v in ("", "*"):
        return name
    return f"{name}=={v}" if is_exact(v) else f"{name}{v}"


def cuda_variant(pkg: Package, target: Target) -> tuple[str | None, str, bool]:
    """``(local tag or None, why, chosen)`` for a CUDA-variant package (compat table for auto)."""
    if pkg.cuda is None:
        return None, "no CUDA variant", True
    if pkg.cuda != "auto":
        return pkg.cuda, f"fixed by the recipe (cuda: {pkg.cuda})", True

    try:
        tag, why = choose_variant(pkg.version, pkg.cuda, from_target(target))
    except LookupError as exc:
        return None, f"cuda: auto cannot be chosen: {exc}", False
    return (None if tag == "pypi" else tag), why, True


def provider(recipe: Recipe) -> str:
    """What provides preinstalled packages: the image, the module, or the base environment."""
    envd = recipe.environment
    if envd.base_image:
        return f"image {envd.base_image}"
    if envd.conda_module:
        return f"module {envd.conda_module}"
    return f"{envd.kind} base environment"


def sort_packages(recipe: Recipe, target: Target, wheelhouse: Path | None,
                  say: Progress) -> Sorted:
    """Decide, per recipe package, whether uv resolves it or the lock records it as given."""
    out = Sorted()
    house = wheelhouse_projects(wheelhouse) if wheelhouse else {}
    if wheelhouse:
        out.find_links.append(str(wheelhouse.resolve()))
    for pkg in recipe.packages:
        key = normalize(pkg.name)
        out.env.update(pkg.env)
        if pkg.preinstalled:
            out.excludes.append(pkg.name)
            out.given.append(LockedPackage(
                name=pkg.name, version=pkg.version, source="preinstalled", required_by=["recipe"],
                provided_by=provider(recipe), verified=False,
                reason=f"not resolved: provided by {provider(recipe)}",
                stand_in=_cpu_stand_in(pkg.name, pkg.version)))
            continue
        version = pkg.version
        tag, why, chosen = cuda_variant(pkg, target)
        if not chosen:
            out.excludes.append(pkg.name)
            out.given.append(LockedPackage(name=pkg.name, version=version, source=pkg.index or "pypi",
                                           required_by=["recipe"], verified=False,
                                           reason=f"not verified: {why}"))
            continue
        if tag and pkg.index and not is_pypi(pkg.index) and is_exact(version) and "+" not in version:
            version = f"{version}+{tag}"
        if pkg.index and not is_pypi(pkg.index):
            out.indexes[key] = (pkg.index, pkg.index_kind)  # where a wheelhouse file's bytes live
        if pkg.index and not is_pypi(pkg.index) and key not in house:
            down = unreachable(pkg.index)
            if down and (stand_in := cpu_stand_in(pkg.name, version, tag, recipe.python)):
                say(f"{pkg.name} {version}: {down}; PyPI's {stand_in} runs on CPU and stands in for it")
                out.replaces[key] = f"{version} from {pkg.index} ({down.split(' (')[0]})"
                out.requirements.append(f"{pkg.name}=={stand_in}")
                out.requested[key] = version
                continue
            if down:
                say(f"{pkg.name} {version}: {down}; recorded unverified")
                out.excludes.append(pkg.name)
                out.given.append(LockedPackage(name=pkg.name, version=version, source=pkg.index,
                                               required_by=["recipe"], verified=False,
                                               reason=f"not verified: {down.split(' (')[0]}",
                                               stand_in=_cpu_stand_in(pkg.name, pkg.version,
                                                                      (recipe.python, target.platform.arch))))
                continue
            links = out.find_links if pkg.index_kind == "find-links" else out.extra_indexes
            if pkg.index not in links:
                links.append(pkg.index)
        if not getattr(pkg, "build_isolation", True) and is_exact(version):
            out.no_build.append((pkg.name, version))
        out.requirements.append(requirement(pkg.name, version))
        out.requested[key] = version
    return out


def _cpu_stand_in(name: str, pinned: str, wheel_for: tuple[str, str] | None = None) -> StandIn:
    """What stands in on a CPU test node for a package the lock does not install (table, else
    PyPI's same version: ``envbuild.lock.standins``). ``wheel_for`` (python, arch): the plan's
    own step installs it, so the lock records its wheel and sha256 too."""
    found = stand_in(name, pinned, lambda n, v: v in (pypi_versions(n) or ()))
    if found.version is None or wheel_for is None:
        return found
    wheel = pypi_cp_wheel(name, found.version, *wheel_for)
    if wheel is None:
        return found
    filename, url, sha = wheel
    return found.model_copy(update={"dist": Dist(kind="wheel", filename=filename, url=url, sha256=sha)})


def cpu_stand_in(name: str, version: str, tag: str | None, python: str) -> str | None:
    """PyPI's build of the same version for a ``+cpu`` pin whose index is unreachable: the
    manylinux torch wheels on PyPI (CUDA builds) run on a CPU-only node. None when PyPI has no
    wheel of that version for the target's Python (torch 1.8.2 is on the LTS index only)."""
    if tag != "cpu" or not is_exact(version):
        return None
    base = version.split("+", 1)[0]
    return base if cp_wheel_on_pypi(name, base, python) else None


def locked(res: Resolved, sorted_: Sorted, wheelhouse: Path | None) -> LockedPackage:
    """A resolved package as a lock entry (source, chosen file, sha256, who requires it)."""
    url, sha, source = res.url, res.sha256, "pypi"
    filename = url.rsplit("/", 1)[-1]
    key = normalize(res.name)
    house = None
    if url.startswith("file://") or url.startswith("/"):
        path = Path(url.removeprefix("file://"))
        sha = sha256_file(path) if path.is_file() else sha
        index, kind = sorted_.indexes.get(key, (None, "index-url"))
        found = upstream(res.name, filename, sha, index, kind)
        source, url = index or "pypi", found.url or f"wheelhouse/{filename}"
        house = FromWheelhouse(upstream=found.status, how=found.how)
    elif not is_pypi(url):
        source = next((i for i in sorted_.find_links + sorted_.extra_indexes
                       if url.startswith(i.rsplit("/", 1)[0])), url.rsplit("/", 1)[0])
    note = None
    if any(normalize(n) == key for n, _ in sorted_.no_build):
        note = ("dependencies not resolved: built with --no-build-isolation against the "
                "environment; the lock holds its file only")
    return LockedPackage(name=res.name, version=res.version, source=source,
                         required_by=list(res.required_by), requested=sorted_.requested.get(key),
                         dist=Dist(kind=res.kind, filename=filename, url=url, sha256=sha),
                         verified=bool(sha), reason=None if sha else "not verified: no sha256 from the index",
                         note=note, replaces=sorted_.replaces.get(key),
                         stand_in=row_for(res.name, sorted_.requested.get(key)), wheelhouse=house)
