"""A README's fenced shell blocks as commands, each with its line (pure).

Blocks fenced with ``` or ~~~ and labelled bash, sh, shell, console, zsh are read; a block
without a label only where it uses ``$ `` prompts or each of its lines looks like a command
(``pipcmd.looks_like_command``: a known program), else it is skipped (sample output, prose) and
counted. A ``$ `` prompt is cut, and in a block where prompts are used the lines without one are
output, not commands. Each command is classified (``pipcmd.classify``): pip, setup, apt, conda,
data, launch or other.

>>> rows = parse("# GPT\\n\\n```bash\\npip install -r requirements/requirements.txt\\n"
...              "python ./deepy.py train.py configs/125M.yml\\n```\\n")
>>> [(r.line, r.command.kind) for r in rows]
[(4, 'pip'), (5, 'launch')]
>>> read("```\\nANGELO:\\nAnd cowards it be strawn to my bed,\\n```\\n").skipped
(1,)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envbuild.draft.pipcmd import Command, located_commands, looks_like_command

SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh", "shell-session", "shellsession"}


@dataclass(frozen=True)
class ReadmeCommand:
    line: int
    command: Command


@dataclass(frozen=True)
class Block:
    """One fenced block: the line of its opening fence, its label (lower case, "" for none) and
    its physical lines ``(number, text)``."""

    line: int
    lang: str
    lines: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class Readme:
    """The commands of a README, and the opening lines of the unlabelled blocks skipped."""

    commands: tuple[ReadmeCommand, ...]
    skipped: tuple[int, ...]


def fenced(text: str) -> list[Block]:
    """Every non-empty fenced block, whatever its label."""
    out: list[Block] = []
    fence, start, lang, current = None, 0, "", []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if fence is None:
            m = re.match(r"^(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)", stripped)
            if m:
                fence, start, lang, current = m.group(1), number, m.group(2).lower(), []
            continue
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            if current:
                out.append(Block(start, lang, tuple(current)))
            fence = None
            continue
        current.append((number, raw))
    return out


def is_shell(block: Block) -> bool:
    """A block labelled as a shell, or unlabelled with prompts or only command lines (see module)."""
    if block.lang:
        return block.lang in SHELL_LANGS
    lines = [t for _, t in block.lines if t.strip() and not t.strip().startswith("#")]
    if any(re.match(r"^\s*\$ ", t) for t in lines):
        return True
    starts = [t for i, t in enumerate(lines) if not (i and lines[i - 1].rstrip().endswith("\\"))]
    return all(looks_like_command(t) for t in starts)


def blocks(text: str) -> list[list[tuple[int, str]]]:
    """The physical lines ``(number, text)`` of each shell block."""
    return [list(b.lines) for b in fenced(text) if is_shell(b)]


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


def read(text: str) -> Readme:
    """Every command of the README's shell blocks, and the unlabelled blocks skipped (see module)."""
    rows, skipped = [], []
    for block in fenced(text):
        if not is_shell(block):
            if not block.lang:
                skipped.append(block.line)
            continue
        rows.extend(ReadmeCommand(line, cmd) for line, cmd in located_commands(_commands_of(list(block.lines))))
    return Readme(tuple(rows), tuple(skipped))


def parse(text: str) -> list[ReadmeCommand]:
    """Every command of the README's shell blocks (see module)."""
    return list(read(text).commands)
