"""The order of a recipe's sources, said by the recipe, never guessed.

Each source's steps run together, in a fixed order of their own: checkout, patches, data
files, build commands, install. Sources go in the order of ``sources:``, except that a source
naming others in ``after:`` comes after every one of them (and after what they come after).
Among the sources free to go, the one listed first goes first, so a recipe without ``after:``
keeps the order it lists. A name that is not a source, a source after itself, or a circle of
``after:`` is an error naming them.

Example: GPT-NeoX's data preparation (a build command of its tree) needs DeeperSpeed
installed, though ``sources:`` lists gpt-neox first::

    sources:
      - {name: gpt-neox, ..., after: [deeperspeed], build: ["python prepare_data.py enwik8"]}
      - {name: deeperspeed, ...}

    >>> order(["gpt-neox", "deeperspeed"], {"gpt-neox": ["deeperspeed"]})
    ['deeperspeed', 'gpt-neox']
"""

from __future__ import annotations


def order(names: list[str], after: dict[str, list[str]]) -> list[str]:
    """``names`` in the order their ``after`` lists say, else in the order given (pure).

    ValueError for a name of ``after`` that is not among ``names``, a name after itself, or a
    circle (naming its members in the order given)."""
    known = set(names)
    for name, earlier in after.items():
        for other in earlier:
            if other == name:
                raise ValueError(f"source {name!r} cannot come after itself (after: [{other}])")
            if other not in known:
                raise ValueError(f"source {name!r} comes after {other!r}, which is not a source "
                                 f"(sources: {', '.join(names)})")
    placed: list[str] = []
    left = list(names)
    while left:
        ready = next((n for n in left if all(o in placed for o in after.get(n, []))), None)
        if ready is None:
            raise ValueError(f"sources {', '.join(left)} wait for each other in a circle of 'after:'")
        placed.append(ready)
        left.remove(ready)
    return placed
