"""A Dockerfile's FROM, ARG, ENV and the pip, apt, setup.py commands of its RUN lines, each
with its line (pure). ``${ARG}`` in FROM is filled from the ARG defaults before it (an ARG without
a default stays ``$ARG``: the image is chosen at build time); ``FROM stage`` of a multi-stage
file is the image that stage was built from.

>>> d = parse("ARG CUDA=11.1.1\\nFROM nvidia/cuda:${CUDA}-devel-ubuntu20.04\\nRUN apt-get update && \\\\\\n"
...           "    apt-get install -y python3.8 git && \\\\\\n    pip install -r requirements/requirements.txt\\n")
>>> d.froms[0].image, [(line, c.kind) for line, c in d.commands]
('nvidia/cuda:11.1.1-devel-ubuntu20.04', [(3, 'other'), (4, 'apt'), (5, 'pip')])
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from envbuild.draft.cite import Read
from envbuild.draft.pipcmd import Command, located_commands


@dataclass(frozen=True)
class From:
    line: int
    written: str  # as in the file (``nvidia/cuda:${CUDA}-devel``)
    image: str  # with the ARG defaults filled in


@dataclass(frozen=True)
class Dockerfile:
    froms: tuple[From, ...] = ()
    args: tuple[Read, ...] = ()  # ``NAME=default`` at its line
    env: tuple[Read, ...] = ()
    commands: tuple[tuple[int, Command], ...] = ()
    runs: tuple[tuple[int, str], ...] = ()  # each RUN's first line and the WORKDIR it starts in ("" for none)


def _instructions(text: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """``(INSTRUCTION, [(line, text)])``: each instruction with its physical lines (comments
    and blank lines inside a continued instruction dropped)."""
    out: list[tuple[str, list[tuple[int, str]]]] = []
    current: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.lstrip().startswith("#") or (not raw.strip() and current):
            continue
        if not raw.strip():
            continue
        current.append((number, raw))
        if not raw.rstrip().endswith("\\"):
            head = current[0][1].split(None, 1)
            out.append((head[0].upper(), current))
            current = []
    if current:
        out.append((current[0][1].split(None, 1)[0].upper(), current))
    return out


def _fill(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}?",
                  lambda m: args.get(m.group(1)) or m.group(2) or m.group(0), text)


def parse(text: str) -> Dockerfile:
    """See module."""
    froms, argrows, envrows, cmds, runs = [], [], [], [], []
    args: dict[str, str] = {}
    workdir = ""
    stages: dict[str, str] = {}  # FROM IMAGE AS NAME: a later FROM NAME builds on IMAGE
    for word, lines in _instructions(text):
        body = [(n, t) for n, t in lines]
        body[0] = (body[0][0], body[0][1].split(None, 1)[1] if len(body[0][1].split(None, 1)) > 1 else "")
        if word == "ARG":
            for n, t in body:
                for item in t.rstrip("\\").split():
                    name, _, default = item.partition("=")
                    args[name] = default.strip("\"'")
                    argrows.append(Read(n, item))
        elif word == "ENV":
            envrows.extend(Read(n, t.rstrip("\\").strip()) for n, t in body if t.strip())
        elif word == "FROM":
            words = [w for w in body[0][1].split() if not w.startswith("--platform")]
            image = words[0] if words else ""
            filled = stages.get(image.lower(), _fill(image, args))  # FROM an earlier stage: its image
            if len(words) >= 3 and words[1].lower() == "as":
                stages[words[2].lower()] = filled
            froms.append(From(body[0][0], image, filled))
            workdir = ""
        elif word == "WORKDIR" and body[0][1].strip():
            workdir = posixpath.normpath(posixpath.join(workdir or "/", _fill(body[0][1].strip(), args)))
        elif word == "RUN":
            runs.append((body[0][0], workdir))
            cmds.extend(located_commands(body))
    return Dockerfile(tuple(froms), tuple(argrows), tuple(envrows), tuple(cmds), tuple(runs))
