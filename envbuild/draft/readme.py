"""A README's fenced shell blocks as commands, each with its line (pure).

Blocks fenced with ``` or ~~~ and labelled bash, sh, shell, console, zsh (or not labelled) are
read; a ``$ `` prompt is cut, and in a block where prompts are used the lines
without one are output, not commands. Each command is classified (``pipcmd.classify``): pip,
setup, apt, conda, data, launch or other.

>>> rows = parse("# GPT\\n\\n```bash\\npip install -r requirements/requirements.txt\\n"
...              "python ./deepy.py train.py configs/125M.yml\\n```\\n")
>>> [(r.line, r.command.kind) for r in rows]
[(4, 'pip'), (5, 'launch')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envbuild.draft.pipcmd import Command, located_commands

SHELL_LANGS = {"", "bash", "sh", "shell", "console", "zsh", "shell-session", "shellsession"}


@dataclass(frozen=True)
class ReadmeCommand:
    line: int
    command: Command


def blocks(text: str) -> list[list[tuple[int, str]]]:
    """The physical lines ``(number, text)`` of each shell block."""
    out: list[list[tuple[int, str]]] = []
    fence, current = None, None
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if fence is None:
            m = re.match(r"^(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)", stripped)
            if m:
                fence = m.group(1)
                current = [] if m.group(2).lower() in SHELL_LANGS else None
            continue
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            if current:
                out.append(current)
            fence, current = None, None
            continue
        if current is not None:
            current.append((number, raw))
    return out


def _commands_of(block: list[tuple[int, str]]) -> list[tuple[int, str]]:
    prompted = any(re.match(r"^\s*\$ ", t) for _, t in block)
    out = []
    for number, raw in block:
        m = re.match(r"^\s*\$ (.*)$", raw) if prompted else None
        if prompted and not m:
            if out and out[-1][1].rstrip().endswith("\\"):
                out.append((number, raw))  # a continued command
            continue
        out.append((number, m.group(1) if m else raw))
    return out


def parse(text: str) -> list[ReadmeCommand]:
    """Every command of the README's shell blocks (see module)."""
    rows = []
    for block in blocks(text):
        rows.extend(ReadmeCommand(line, cmd) for line, cmd in located_commands(_commands_of(block)))
    return rows
