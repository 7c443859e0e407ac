"""The ``envbuild render`` command that writes a render again, as its header says it. Pure.

A rendered file names the command that made it (``# Regenerate: ...``): the recipe as the user
named it (a shipped name, or the path given), the target, the format and every input that
changed what was written: ``--lock`` (the file given, or the one found in ``$ENVBUILD_LOCKDIR``;
the shipped lock is found again without it), ``--base``, ``--facts``, ``--wheelhouse`` and each
``--allow-unverified NAME``. Each value is one quoted shell word.

>>> render_command("my.yaml", "local", "dockerfile", lock="env/my stack.lock")
"envbuild render my.yaml --target local --lock 'env/my stack.lock' --format dockerfile"
"""

from __future__ import annotations

from envbuild.render.shell import q


def render_command(recipe: str, target: str, fmt: str, *, lock: str | None = None, base: str | None = None,
                   facts: str | None = None, wheelhouse: str | None = None,
                   allow_unverified: tuple[str, ...] | list[str] = ()) -> str:
    """``envbuild render RECIPE --target TARGET [inputs] --format FMT`` (module docstring)."""
    words = ["envbuild", "render", q(recipe), "--target", q(target)]
    for flag, value in (("--lock", lock), ("--base", base), ("--facts", facts), ("--wheelhouse", wheelhouse)):
        words += [flag, q(value)] if value else []
    words += [w for name in allow_unverified for w in ("--allow-unverified", q(name))]
    return " ".join([*words, "--format", fmt])
