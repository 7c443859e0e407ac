"""Where a fact was read: a file of the repository and a line, at the drafted commit."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Cite:
    """``file:line`` of the repository (``repo`` names another repository's tree: a followed
    VCS dependency, ``deeperspeed@eb7f5cff36:requirements/requirements.txt:3``)."""

    file: str
    line: int
    repo: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{self.repo}:{where}" if self.repo else where


def inside(base: str, rel: str) -> str | None:
    """``rel`` (relative to the folder of the file ``base``) as a path from the repository's
    root, or None when it leaves the repository (``../../etc/x``, an absolute path).

    >>> inside("requirements/requirements.txt", "requirements-dev.txt")
    'requirements/requirements-dev.txt'
    >>> inside("requirements.txt", "../x.txt") is None
    True
    """
    if not rel or rel.startswith("/") or "\\" in rel:
        return None
    parts = base.split("/")[:-1]
    for part in rel.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) or None


@dataclass(frozen=True)
class Read:
    """One value a parser read, at its 1-based line of the file (``torch>=1.8``, ``>=3.8``)."""

    line: int
    text: str


@dataclass(frozen=True)
class Declared:
    """What a package metadata file declares: its dependencies and its Python, each at a line;
    ``notes`` say what could not be read as a literal (a computed install_requires)."""

    requires: tuple[Read, ...] = ()
    python: Read | None = None
    notes: tuple[str, ...] = ()
    extras: tuple[tuple[str, tuple[Read, ...]], ...] = ()  # (extra, its requirements): extras_require

    def extra(self, name: str) -> tuple[Read, ...] | None:
        """The requirements of extra ``name`` (names compared as pip does: ``GPU_flash`` is
        ``gpu-flash``), or None when the file defines no such extra as a literal."""
        def key(text: str) -> str:
            return re.sub(r"[-_.]+", "-", text).lower()
        return next((rows for extra, rows in self.extras if key(extra) == key(name)), None)
