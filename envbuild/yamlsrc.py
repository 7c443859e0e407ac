"""Load YAML user files with line numbers, and validate them into pydantic models.

Every error names the file, the line and the field, with a hint:
``recipes/x.yaml:12: packages[3].version: field required`` (exit code 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from envbuild.errors import InputError

M = TypeVar("M", bound=BaseModel)
PathKey = tuple[Any, ...]


class _Located:
    """Maps a path of keys/indexes to the 1-based line where it starts."""

    def __init__(self) -> None:
        self.lines: dict[PathKey, int] = {}

    def line_for(self, path: PathKey) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())


def _walk(node: yaml.Node, path: PathKey, loc: _Located) -> Any:
    loc.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _walk(key_node, path + ("<key>",), _Located())
            if key in out:
                raise InputError(
                    f"duplicate key {key!r}",
                    hint="each field may appear once; remove one of them",
                    where=f"line {key_node.start_mark.line + 1}",
                )
            loc.lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, path + (key,), loc)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(child, path + (i,), loc) for i, child in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.ScalarNode) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def load_yaml(path: str | Path, text: str | None = None) -> tuple[Any, _Located]:
    """Parse a YAML file into plain data plus a line locator; syntax errors become InputError."""
    path = Path(path)
    if text is None:
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise InputError(f"{path}: no such file", hint="check the path") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else "?"
        raise InputError(
            f"YAML syntax error: {exc.problem}",
            hint="fix the indentation or quoting on that line (a value with ': ' needs quotes)",
            where=f"{path}:{line}",
        ) from None
    loc = _Located()
    if node is None:
        raise InputError("file is empty", hint="see `envbuild show` for a complete example", where=f"{path}:1")
    try:
        data = _walk(node, (), loc)
    except InputError as exc:
        exc.where = f"{path}:{exc.where.removeprefix('line ')}" if exc.where else str(path)
        raise
    return data, loc


def _dotted(loc_path: PathKey) -> str:
    out = ""
    for part in loc_path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<top>"


def validate(model: type[M], data: Any, source: str | Path, loc: _Located | None = None,
             hint: str | None = None) -> M:
    """Validate plain data against ``model``; the first error becomes a located InputError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field_path = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        line = loc.line_for(field_path) if loc else None
        where = f"{source}:{line}" if line else str(source)
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = f"{_dotted(field_path)}: unknown field"
            default_hint = "remove it or check its spelling against `envbuild show --schema`"
        elif kind == "missing":
            msg = f"{_dotted(field_path)}: required field is missing"
            default_hint = "add it; every pin needs a version or SHA and a reason"
        else:
            msg = f"{_dotted(field_path)}: {err['msg']}"
            default_hint = "fix the value"
        more = len(exc.errors()) - 1
        if more:
            msg += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise InputError(msg, hint=hint or default_hint, where=where) from None
