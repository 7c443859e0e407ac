"""pip requirements files, parsed with line numbers (pure), and VCS requirements.

Each logical line (a trailing ``\\`` joins the next) becomes one row: a requirement
(``torch==1.8.1``), an include (``-r other.txt``), a constraints file (``-c c.txt``), an
editable install (``-e .``), a VCS requirement (``git+https://...@SHA#egg=deepspeed`` or
``name @ git+...``), or an option pip reads (``--find-links``, ``--extra-index-url``).

>>> [(r.line, r.kind, r.target) for r in parse("-r base.txt\\ntorch==1.8.1  # pinned\\n")]
[(1, 'include', 'base.txt'), (2, 'requirement', 'torch==1.8.1')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement

Kind = Literal["requirement", "include", "constraint", "editable", "vcs", "option", "unparsed"]


@dataclass(frozen=True)
class Vcs:
    """A pinned (or unpinned) git requirement: the repository URL, its ref, the project name."""

    name: str | None
    url: str
    ref: str | None


@dataclass(frozen=True)
class ReqRow:
    """One logical line of a requirements file: ``line`` (1-based, where it starts), ``kind``,
    ``text`` as written (comment cut), ``target`` (the requirement, the path or the URL)."""

    line: int
    kind: Kind
    text: str
    target: str
    vcs: Vcs | None = None


def logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, line)`` with ``\\``-continued lines joined and comments cut."""
    out: list[tuple[int, str]] = []
    start, buf = 0, ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            out.append((start, re.sub(r"\s+", " ", buf.strip())))
        buf = ""
    if buf.strip():
        out.append((start, re.sub(r"\s+", " ", buf.strip())))
    return out


def vcs_requirement(text: str) -> Vcs | None:
    """The git repository a requirement names (``git+URL[@REF][#egg=NAME]`` or ``NAME @
    git+URL[@REF]``), else None.

    >>> vcs_requirement("git+https://github.com/EleutherAI/DeeperSpeed.git@eb7f5cff#egg=deepspeed")
    Vcs(name='deepspeed', url='https://github.com/EleutherAI/DeeperSpeed', ref='eb7f5cff')
    """
    s = text.strip()
    name = None
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*@\s*(git\+\S+)", s)
    if m:
        name, s = m.group(1), m.group(2)
    if not s.startswith("git+"):
        return None
    url, _, fragment = s[4:].partition("#")
    egg = re.search(r"(?:^|&)egg=([A-Za-z0-9][A-Za-z0-9._-]*)", fragment)
    name = name or (egg.group(1) if egg else None)
    scheme, sep, rest = url.partition("://")
    if sep:
        host, slash, path = rest.partition("/")
        prefix = f"{scheme}://{host}{slash}"
    else:  # scp-like git@github.com:owner/name.git@ref
        host, colon, path = url.partition(":")
        prefix = f"{host}{colon}"
    ref = None
    if "@" in path:
        path, _, ref = path.rpartition("@")
    return Vcs(name=name, url=(prefix + path).removesuffix(".git"), ref=ref or None)


def _row(line: int, text: str) -> ReqRow:
    words = text.split()
    head = words[0]
    for flag, kind in (("-r", "include"), ("--requirement", "include"), ("-c", "constraint"),
                       ("--constraint", "constraint"), ("-e", "editable"), ("--editable", "editable")):
        if head == flag and len(words) > 1:
            target = words[1]
        elif head.startswith(flag + "=") or (len(flag) == 2 and head.startswith(flag) and len(head) > 2):
            target = head.split("=", 1)[1] if "=" in head else head[2:]
        else:
            continue
        vcs = vcs_requirement(target) if kind == "editable" else None
        return ReqRow(line, kind, text, target, vcs)
    if head.startswith("-"):
        return ReqRow(line, "option", text, text)
    if (vcs := vcs_requirement(text)) is not None:
        return ReqRow(line, "vcs", text, text, vcs)
    try:
        Requirement(text)
    except InvalidRequirement:
        return ReqRow(line, "unparsed", text, text)
    return ReqRow(line, "requirement", text, text)


def parse(text: str) -> list[ReqRow]:
    """Every logical line of a requirements file as a row (see module)."""
    return [_row(line, body) for line, body in logical_lines(text)]
