"""pyproject.toml's ``[project]`` dependencies and requires-python, with line numbers (pure).

The values come from ``tomllib``; each one's line is where its string first appears after the
``[project]`` header (TOML keeps no positions).

>>> d = parse('[build-system]\\nrequires = ["setuptools"]\\n[project]\\nname = "x"\\n'
...           'requires-python = ">=3.9"\\ndependencies = [\\n  "torch>=2",\\n  "einops",\\n]\\n')
>>> [(r.line, r.text) for r in d.requires], d.python
([(7, 'torch>=2'), (8, 'einops')], Read(line=5, text='>=3.9'))
"""

from __future__ import annotations

import re
import tomllib

from envbuild.draft.cite import Declared, Read


def _line_of(lines: list[str], start: int, value: str) -> int:
    for i in range(start, len(lines)):
        if f'"{value}"' in lines[i] or f"'{value}'" in lines[i]:
            return i + 1
    return start + 1


def parse(text: str) -> Declared:
    """See module; a file that is not TOML, or dynamic dependencies, is a note."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return Declared(notes=(f"pyproject.toml is not TOML ({exc}): not read",))
    project = data.get("project") or {}
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.fullmatch(r"\s*\[project\]\s*", line)), 0)
    notes = []
    if "dependencies" in (project.get("dynamic") or []):
        notes.append("pyproject.toml: [project] dependencies are dynamic (computed by the build backend)")
    requires = tuple(Read(_line_of(lines, start, str(d)), str(d)) for d in project.get("dependencies") or [])
    python = project.get("requires-python")
    optional = project.get("optional-dependencies")
    optional = optional if isinstance(optional, dict) else {}
    at = next((i for i, line in enumerate(lines) if re.fullmatch(r"\s*\[project\.optional-dependencies\]\s*", line)),
              start)
    extras = tuple((str(k), tuple(Read(_line_of(lines, at, str(d)), str(d)) for d in v))
                   for k, v in optional.items() if isinstance(v, list))
    return Declared(requires, Read(_line_of(lines, start, python), python) if isinstance(python, str) else None,
                    tuple(notes), extras)
