"""Folders of knowledge a site or a user adds to envbuild's shipped tables, without editing it.

``ENVBUILD_KNOWLEDGE_PATH`` names folders (separated by ``:``), and an installed package may name
one by an entry point in the group ``envbuild.knowledge`` (an object that is, or returns, the
folder's path). Each folder may hold any of the tables that read them: ``apex_commits.yaml``
(``envbuild.compat.commits``), ``torch_builds.yaml``, ``node_stacks.yaml``, ``fixes.yaml`` and
``packages.yaml`` (``envbuild.port.tables``), ``builders.yaml`` (``envbuild.draft.builders``), in
the shipped layout. Their rows come after the
shipped ones; a row whose id is already given is refused by the table that reads it, naming both
files. The files are YAML data, validated, never run.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from envbuild.errors import InputError
from envbuild.yamlsrc import load_yaml, validate

KNOWLEDGE_PATH = "ENVBUILD_KNOWLEDGE_PATH"
ENTRY_POINTS = "envbuild.knowledge"
M = TypeVar("M", bound=BaseModel)
TABLES = ("apex_commits.yaml", "torch_builds.yaml", "node_stacks.yaml", "fixes.yaml", "packages.yaml",
          "builders.yaml")


def folders() -> tuple[Path, ...]:
    """The added folders: the entry points' (by name), then ``ENVBUILD_KNOWLEDGE_PATH``'s in order."""
    out: list[Path] = []
    for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        try:
            obj = ep.load()
            out.append(Path(obj() if callable(obj) else obj))
        except Exception as exc:  # a third party's entry point: said, never a traceback
            raise InputError(f"the knowledge entry point {ep.name!r} ({ep.value}) could not be loaded: "
                             f"{type(exc).__name__}: {exc}", hint="reinstall the package that registers it") from None
    for part in os.environ.get(KNOWLEDGE_PATH, "").split(os.pathsep):
        if part:
            folder = Path(part)
            if not folder.is_dir():
                raise InputError(f"{KNOWLEDGE_PATH} names {part!r}, which is not a folder",
                                 hint="name folders holding any of " + ", ".join(TABLES))
            out.append(folder)
    return tuple(out)


def stamped(where: tuple[Path, ...], name: str) -> tuple[tuple[Path, int | None], ...]:
    """Each folder with the modification time of its ``name`` (None: absent): a key under which a
    table read from them may be cached, and read again when a file changes."""
    out: list[tuple[Path, int | None]] = []
    for folder in where:
        try:
            out.append((folder, (folder / name).stat().st_mtime_ns))
        except OSError:
            out.append((folder, None))
    return tuple(out)


def tables(name: str, model: type[M], where: tuple[tuple[Path, int | None], ...],
           shipped: Path) -> list[tuple[Path, M]]:
    """``name`` read from each folder of ``where`` (``stamped``'s pairs) that holds it, the
    ``shipped`` folder always, each validated as ``model``: (file, table) in folder order."""
    out: list[tuple[Path, M]] = []
    for folder, stamp in where:
        path = folder / name
        if folder == shipped or stamp is not None:
            data, loc = load_yaml(path)
            out.append((path, validate(model, data, path, loc)))
    return out


def merged(name: str, model: type[BaseModel], field: str, key, where: tuple, shipped: Path) -> tuple:  # noqa: ANN001
    """Every table's rows of ``field`` in folder order; an id (``key``: a row's attribute name,
    or a function of the row) seen before is refused, naming both files."""
    seen: dict[str, Path] = {}
    rows = []
    for path, table in tables(name, model, where, shipped):
        for row in getattr(table, field):
            ident = str(key(row) if callable(key) else getattr(row, key))
            if ident in seen:
                raise InputError(f"{path}: {field} row {ident!r} is already given by {seen[ident]}",
                                 hint="give it another id: a site's rows add to envbuild's, never replace them")
            seen[ident] = path
            rows.append(row)
    return tuple(rows)
