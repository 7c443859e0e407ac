"""Turn command-line inputs into the data the library works on.

Shared by ``check``, ``plan`` and ``provision``: a recipe and a target by name or path, the
node facts (a facts file, live local facts for the ``local`` target, or the target's profile),
and the committed lock when there is one. Also the checks of option values that every command
taking nodes shares (``validate_port``, ``validate_text``, ``hosts_option``).
"""

from __future__ import annotations

from pathlib import Path

from envbuild.errors import InputError
from envbuild.facts.model import NodeFacts
from envbuild.recipes import default_recipe, load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target
from envbuild.targets.schema import Target


def recipe_or_default(name: str | None) -> Recipe:
    return load_recipe(name) if name else default_recipe()


def node_facts(target: Target, facts_file: str | None = None) -> list[NodeFacts]:
    """Facts per node: from ``facts_file``, else live local facts for ``local``, else the profile.

    Live or file facts are completed by the target profile (``refine``).
    """
    from envbuild.facts.profile import from_target, refine

    if facts_file:
        from envbuild.facts.load import load_facts

        return [refine(target, f) for f in load_facts(facts_file)]
    if target.from_facts:
        from envbuild.facts.gather import gather_local

        return [gather_local()]
    return [from_target(target)]


def lock_source(recipe: Recipe, target: Target, lock_file: str | None = None,
                lockdir: Path | None = None) -> Path:
    """The lockfile a command reads: --lock, else ``envbuild.lock.make.locate_lock`` (the
    lockdir -- ``lockdir``, $ENVBUILD_LOCKDIR -- then the locks shipped with envbuild). It may
    not exist; never a path relative to the working directory unless given so."""
    from envbuild.lock.make import locate_lock

    return Path(lock_file) if lock_file else locate_lock(recipe.name, target.name, lockdir)


def find_lock(recipe: Recipe, target: Target, lock_file: str | None = None,
              lockdir: Path | None = None):
    """The lock at ``lock_source`` (--lock, the lockdir, the shipped locks), None when there is none.

    A lock that does not satisfy the recipe is refused (CheckFailed with the regenerate command).
    """
    from envbuild.lock.make import check_lock_file

    path = lock_source(recipe, target, lock_file, lockdir)
    if lock_file and not path.is_file():
        raise InputError(f"lock file {lock_file} does not exist", hint="check the path or omit --lock")
    if path.is_file():
        return check_lock_file(path, recipe, target)
    return None


def recipe_and_target(recipe: str | None, target: str) -> tuple[Recipe, Target]:
    return recipe_or_default(recipe), load_target(target)


def validate_port(value: object, where: str) -> int:
    """``value`` (an int or a string of digits) as a TCP port 1..65535, else InputError naming ``where``.

    >>> validate_port("2222", "--hosts h:2222")
    2222
    """
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    port = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else 0
    if not 0 < port < 65536:
        raise InputError(f"{where}: port {value!r} is not a TCP port (1-65535)", hint="ports are 1-65535")
    return port


def validate_text(value: object, where: str) -> str:
    """A value that must be one plain value (ansible_host, ansible_user, a host name) as text.

    A list or mapping where one value belongs (``ansible_host: [a, b]``) is an InputError
    naming ``where``, instead of a host literally called "['a', 'b']".

    >>> validate_text(10, "inventory.yaml: host n1: ansible_port")
    '10'
    """
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
        return str(value)
    got = f"a {type(value).__name__}" if not isinstance(value, str) else "empty"
    raise InputError(f"{where}: expected one value (a string), got {got}: {value!r}"[:300],
                     hint="write a single value, e.g. ansible_host: 10.0.0.1")


def hosts_option(ctx, param, value: str | None) -> str | None:  # noqa: ANN001 - click's callback
    """click callback for ``--hosts``: given but empty (``--hosts ''``) is an InputError."""
    if value is not None and not value.replace(",", "").strip():
        raise InputError(f"--{param.name}: no host given (the value is empty)",
                         hint="e.g. --hosts root@10.0.0.1,10.0.0.2:2222; leave the option out for none")
    return value
