"""setup.cfg's ``[options]`` install_requires and python_requires, with line numbers (pure).

>>> d = parse("[metadata]\\nname = x\\n[options]\\npython_requires = >=3.8\\ninstall_requires =\\n"
...           "    numpy>=1.22\\n    regex\\n")
>>> [(r.line, r.text) for r in d.requires], d.python
([(6, 'numpy>=1.22'), (7, 'regex')], Read(line=4, text='>=3.8'))
"""

from __future__ import annotations

import re

from envbuild.draft.cite import Declared, Read


def _options(text: str) -> dict[str, list[Read]]:
    """``{key: [values at their lines]}`` of the ``[options]`` section (continuation lines
    indented; ``#``/``;`` comments dropped)."""
    out: dict[str, list[Read]] = {}
    section, key = None, None
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith(("#", ";")):
            continue
        if m := re.fullmatch(r"\s*\[([^\]]+)\]\s*", raw):
            section, key = m.group(1).strip(), None
            continue
        if section != "options":
            continue
        if raw[0] in " \t" and key is not None:
            out[key].append(Read(number, raw.strip()))
        elif "=" in raw:
            key, _, value = (part.strip() for part in raw.partition("="))
            out[key] = [Read(number, value)] if value else []
    return out


def parse(text: str) -> Declared:
    """install_requires (one row per line or ``;``-free entry) and python_requires."""
    opts = _options(text)
    requires = tuple(Read(r.line, r.text.split(" #")[0].strip()) for r in opts.get("install_requires", []))
    notes = tuple(f"setup.cfg:{r.line}: install_requires names a file ({r.text}): not read"
                  for r in requires if r.text.startswith("file:"))
    python = (opts.get("python_requires") or [None])[0]
    return Declared(tuple(r for r in requires if not r.text.startswith("file:")), python, notes)
