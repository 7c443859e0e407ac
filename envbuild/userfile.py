"""Read a user-supplied file (recipe, target, facts, lock, run.json) as text, or refuse it.

Everything a reader of user files can trip on is turned into an ``InputError`` that names
the file (and the line where it is known), here, at the loading site: a missing file, a
directory, a file too large, binary data (NUL bytes), text that is not UTF-8, JSON nested
deeper than any envbuild document. Limits are generous for real documents (the largest
shipped lockfile is 7 KiB and 5 levels deep) and small enough that a hostile file fails fast.

>>> loads_json('{"a": [1, 2]}', "x.json")
{'a': [1, 2]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envbuild.errors import InputError

MAX_BYTES = 16 * 1024 * 1024  # no recipe, target, facts file or lock comes near this
MAX_DEPTH = 64  # nesting of mappings/lists; real documents are under 10 levels deep


def line_at(data: str | bytes, offset: int) -> int:
    """1-based line of the character (or byte) at ``offset``."""
    if isinstance(data, str):
        return data.count("\n", 0, max(offset, 0)) + 1
    return data.count(b"\n", 0, max(offset, 0)) + 1


def read_text(path: str | Path, what: str = "file", hint: str | None = None) -> str:
    """The UTF-8 text of ``path``; InputError naming the file for anything that is not that."""
    path = Path(path)
    hint = hint or f"pass a {what} as UTF-8 text (YAML or JSON)"
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: cannot read {what}: no such file", hint="check the path") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a {what}", hint=hint) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror or exc}", hint=hint) from None
    return decode(raw, path, what, hint)


def decode(raw: bytes, source: str | Path, what: str = "file", hint: str | None = None) -> str:
    """``raw`` as UTF-8 text; refuses oversized, binary (NUL) and non-UTF-8 data, naming the line."""
    hint = hint or f"pass a {what} as UTF-8 text (YAML or JSON)"
    if len(raw) > MAX_BYTES:
        raise InputError(f"{source}: {what} is larger than {MAX_BYTES // (1024 * 1024)} MiB",
                         hint=hint)
    nul = raw.find(b"\0")
    if nul >= 0:
        raise InputError(f"binary data (NUL byte at offset {nul}), not a {what}", hint=hint,
                         where=f"{source}:{line_at(raw, nul)}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                         f"not a {what}", hint=hint + "; re-save the file as UTF-8",
                         where=f"{source}:{line_at(raw, exc.start)}") from None


def depth(data: Any) -> int:
    """How deeply lists and mappings nest in ``data`` (iterative: safe on any depth)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        obj, level = todo.pop()
        if isinstance(obj, dict):
            deepest = max(deepest, level)
            todo.extend((v, level + 1) for v in obj.values())
        elif isinstance(obj, list):
            deepest = max(deepest, level)
            todo.extend((v, level + 1) for v in obj)
    return deepest


def too_deep(source: str | Path, what: str) -> InputError:
    return InputError(f"{source}: {what} nests lists/mappings more than {MAX_DEPTH} levels deep",
                      hint=f"a {what} is a few levels deep; this file is damaged or not a {what}")


def loads_json(text: str, source: str | Path, what: str = "JSON file",
               hint: str | None = None) -> Any:
    """Parse JSON text; syntax errors (with their line), deep nesting and huge numbers -> InputError."""
    hint = hint or f"pass a valid {what}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                         hint=hint) from None
    except RecursionError:
        raise too_deep(source, what) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise InputError(f"{source}: not valid JSON ({exc})", hint=hint) from None
    if depth(data) > MAX_DEPTH:
        raise too_deep(source, what)
    return data


def read_json(path: str | Path, what: str = "JSON file", hint: str | None = None) -> Any:
    """``loads_json(read_text(path))``."""
    return loads_json(read_text(path, what, hint), path, what, hint)
