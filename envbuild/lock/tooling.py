"""The build tooling an environment needs pinned before anything is built (pip, setuptools,
wheel), and why: a function of the recipe alone. The lock resolves these with hashes
(``Lock.tooling``, ``envbuild.lock.make``); the plan installs them hash-checked
(``envbuild.plan.build``); ``lock --check`` finds a lock that lacks one (``envbuild.lock.check``)."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from envbuild.errors import InputError
from envbuild.recipes.schema import Recipe


# pip releases that matter for build-option syntax (pip 23.1 dropped the setup.py install
# fallback and deprecated --global-option; see envbuild.patches.apex_build).
PIP_RELEASES = ("20.3.4", "21.3.1", "22.3.1", "23.0.1", "23.3.2", "24.0", "24.3.1", "25.0.1")
PIP_DEFAULT = "24.0"


def pip_release(spec: str | None) -> tuple[str, str]:
    """An exact pip version for the environment, and why: the newest known release the
    recipe's pip specifier admits, else ``PIP_DEFAULT``."""
    if not spec:
        return PIP_DEFAULT, f"pip pinned to {PIP_DEFAULT} so build-option syntax is known"
    if spec[:1].isdigit():
        return spec, f"recipe pins pip {spec}"
    allowed = [v for v in PIP_RELEASES if v in SpecifierSet(spec)]
    if not allowed:
        raise InputError(f"no known pip release satisfies pip{spec}",
                         hint=f"pin an exact pip version; known: {', '.join(PIP_RELEASES)}")
    return allowed[-1], f"newest pip release admitted by the recipe's pip{spec}"


# setuptools before 70.1 has no bdist_wheel of its own (the `wheel` package provides it, up to
# 0.45; 0.46 dropped it). Without build isolation the env's own setuptools builds every
# editable/wheel/Apex install, and a venv of Python <= 3.11 starts with setuptools 65.
WHEEL_SPEC = "<0.46"
WHEEL_WHY = ("setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and editable "
             "installs; without it pip fails with \"invalid command 'bdist_wheel'\"")


@dataclass(frozen=True)
class Tool:
    """One package of the environment's build tooling (pip, setuptools, wheel)."""

    name: str
    spec: str  # "==24.0", "<0.46", "==65.5.0"
    why: str

    @property
    def requirement(self) -> str:
        return f"{self.name}{self.spec}"


def tooling(recipe: Recipe) -> list[Tool]:
    """The tooling the environment needs pinned before anything is built, and why. The lock
    resolves these with hashes (``Lock.tooling``); the plan installs them hash-checked."""
    out: list[Tool] = []
    if recipe.environment.pip or recipe.apex:  # the pip version decides Apex's option syntax
        version, why = pip_release(recipe.environment.pip)
        out.append(Tool("pip", f"=={version}", why))
    if recipe.environment.setuptools:
        spec = recipe.environment.setuptools
        out.append(Tool("setuptools", f"=={spec}" if spec[:1].isdigit() else spec,
                        "setuptools pinned by the recipe"))
    built = [s.name for s in recipe.sources if s.install in ("editable", "wheel", "apex")]
    if built:
        out.append(Tool("wheel", WHEEL_SPEC,
                        f"{', '.join(built)} built with --no-build-isolation: {WHEEL_WHY}"))
    return out
