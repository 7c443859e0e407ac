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
        errors = exc.errors()
        # An unknown field explains a "missing" one next to it (a misspelt key): report it first.
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        field_path = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        line = loc.line_for(field_path) if loc else None
        where = f"{source}:{line}" if line else str(source)
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = f"{_dotted(field_path)}: unknown field"
            default_hint = _close_field_hint(model, field_path) or \
                "remove it or check its spelling against `envbuild show --schema`"
        elif kind == "missing":
            msg = f"{_dotted(field_path)}: required field is missing"
            default_hint = "add it; every pin needs a version or SHA and a reason"
        else:
            msg = f"{_dotted(field_path)}: {err['msg']}"
            default_hint = "fix the value; `envbuild show --schema` lists every field and its type"
        more = len(errors) - 1
        if more:
            msg += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise InputError(msg, hint=hint or default_hint, where=where) from None


def _close_field_hint(model: type[BaseModel], path: PathKey) -> str | None:
    """'did you mean ...' for a misspelt key, looking up the model that owns it."""
    import difflib

    owner: type[BaseModel] | None = model
    for part in path[:-1]:
        if isinstance(part, int) or owner is None:
            continue
        info = owner.model_fields.get(str(part))
        owner = _model_of(info.annotation) if info else None
    if owner is None:
        return None
    names = [f.alias or n for n, f in owner.model_fields.items()]
    close = difflib.get_close_matches(str(path[-1]), names, n=1)
    return f"did you mean {close[0]!r}? (fields here: {', '.join(names)})" if close else None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as ``list[Package]`` or ``Source | None``."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None
