"""Load YAML user files with line numbers, and validate them into pydantic models.

Every error names the file, the line and the field, with a hint:
``recipes/x.yaml:12: packages[3].version: field required`` (exit code 2).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from envbuild.errors import InputError
from envbuild.userfile import MAX_DEPTH, line_at, read_text

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


class _Refused(Exception):
    """Raised inside the loader; becomes an InputError with the file name in ``load_yaml``."""

    def __init__(self, message: str, line: int | None, hint: str):
        super().__init__(message)
        self.message, self.line, self.hint = message, line, hint


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader's composer with a nesting limit and an alias budget.

    Deep nesting would exhaust Python's stack (the composer recurses per level) and aliases
    let a few lines stand for billions of nodes ("billion laughs"): both are refused while
    composing, before anything is expanded.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise _Refused(f"more than {MAX_ALIASES} YAML aliases (*name)", mark.line + 1,
                               ALIAS_HINT)
            return super().compose_node(parent, index)
        if self.check_event(yaml.ScalarEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(f"lists/mappings nested more than {MAX_DEPTH} levels deep",
                               mark.line + 1, "flatten the document; real files are a few levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


MAX_ALIASES = 100
MAX_EXPANDED = 100_000  # nodes a document with aliases may stand for once expanded
ALIAS_HINT = "write the values out instead of using YAML anchors (&name) and aliases (*name)"


def _expanded_size(root: yaml.Node) -> int:
    """Nodes the document stands for with every alias expanded; _Refused on a cycle or too many.

    Memoized per node object, so shared (aliased) subtrees are counted without expanding them.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, done = todo.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED + 1)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _Refused("a YAML alias refers to a node that contains it (a cycle)",
                           node.start_mark.line + 1, ALIAS_HINT)
        on_path.add(key)
        todo.append((node, True))
        todo.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


_PLAIN_TAGS = {yaml.MappingNode: "tag:yaml.org,2002:map", yaml.SequenceNode: "tag:yaml.org,2002:seq"}


def _walk(node: yaml.Node, path: PathKey, loc: _Located, ctor: yaml.constructor.SafeConstructor) -> Any:
    loc.lines.setdefault(path, node.start_mark.line + 1)
    plain = _PLAIN_TAGS.get(type(node))
    if plain and node.tag != plain:  # !!python/object/apply:..., !!set, !!omap, !custom
        raise InputError(f"unsupported YAML tag {node.tag!r}",
                         hint="remove the tag (!...): envbuild files hold plain mappings, lists and values",
                         where=f"line {node.start_mark.line + 1}")
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _walk(key_node, path + ("<key>",), _Located(), ctor)
            if not isinstance(key, Hashable) or isinstance(key, (dict, list)):
                raise InputError(
                    "a mapping key must be a plain value, not a list or mapping",
                    hint="write the key as a string",
                    where=f"line {key_node.start_mark.line + 1}",
                )
            if key in out:
                raise InputError(
                    f"duplicate key {key!r}",
                    hint="each field may appear once; remove one of them",
                    where=f"line {key_node.start_mark.line + 1}",
                )
            loc.lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, path + (key,), loc, ctor)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(child, path + (i,), loc, ctor) for i, child in enumerate(node.value)]
    return _scalar(node, ctor)


def _scalar(node: yaml.ScalarNode, ctor: yaml.constructor.SafeConstructor) -> Any:
    try:
        return ctor.construct_object(node, deep=True)
    except yaml.YAMLError as exc:  # an unknown or unsafe tag (!!python/object), bad !!binary
        raise InputError(f"cannot read value {node.value[:40]!r}: {getattr(exc, 'problem', None) or exc}",
                         hint="remove the YAML tag (!...) and write a plain value",
                         where=f"line {node.start_mark.line + 1}") from None
    # !!int abc, a 5000-digit integer; !!int with no value (IndexError), !!bool maybe (KeyError),
    # !!timestamp soon (AttributeError): PyYAML's constructors assume a well-formed value
    except (ValueError, TypeError, OverflowError, IndexError, KeyError, AttributeError) as exc:
        raise InputError(f"cannot read value {node.value[:40]!r} as {node.tag.rsplit(':', 1)[-1]}: {exc}",
                         hint="quote it to keep it as text, or fix the value",
                         where=f"line {node.start_mark.line + 1}") from None


def _compose(text: str, path: Path) -> yaml.Node | None:
    """The YAML node graph of ``text`` (bounded); syntax errors become located InputErrors."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader checks for unprintable characters here
        node = loader.get_single_node()
        if node is not None and _expanded_size(node) > MAX_EXPANDED:
            raise _Refused(f"its YAML aliases expand to more than {MAX_EXPANDED} values", None,
                           ALIAS_HINT)
        return node
    except _Refused as exc:
        raise InputError(exc.message, hint=exc.hint,
                         where=f"{path}:{exc.line}" if exc.line else str(path)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else "?"
        raise InputError(
            f"YAML syntax error: {exc.problem or exc.context}",
            hint="fix the indentation or quoting on that line (a value with ': ' needs quotes)",
            where=f"{path}:{line}",
        ) from None
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        raise InputError(
            f"character U+{_codepoint(exc.character):04X} is not allowed in YAML",
            hint="remove the control character; a YAML file is printable UTF-8 text",
            where=f"{path}:{line_at(text, exc.position)}",
        ) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", hint="fix the YAML syntax", where=str(path)) from None
    except RecursionError:  # a safety net: the depth limit above is far below Python's
        raise InputError(f"{path}: nested too deeply", hint="flatten the document") from None
    finally:
        if loader is not None:
            loader.dispose()


def _codepoint(character: int | str | bytes) -> int:
    return character if isinstance(character, int) else ord(character[:1] or "\0")


def load_yaml(path: str | Path, text: str | None = None) -> tuple[Any, _Located]:
    """Parse a YAML file into plain data plus a line locator; anything malformed -> InputError.

    Refused with the file (and line) named: a missing file or a directory, binary or
    non-UTF-8 data, syntax errors, nesting deeper than ``MAX_DEPTH``, more than ``MAX_ALIASES``
    aliases or aliases that expand past ``MAX_EXPANDED`` values, unknown tags, duplicate keys.
    """
    path = Path(path)
    if text is None:
        text = read_text(path, "YAML file", hint="pass a YAML file (UTF-8 text)")
    read = _READ.get(text)
    if read is None:
        read = _read(text, path)
        if len(text) <= _READ_MAX_CHARS:
            while len(_READ) >= _READ_MAX:
                del _READ[next(iter(_READ))]  # the oldest
            _READ[text] = read
    data, lines = read
    loc = _Located()
    loc.lines = dict(lines)
    return copy.deepcopy(data), loc


# Documents read by this process, by their text: a process reads the same few again and again
# (every shipped recipe ~15 times in a test worker's collection, 14 of its 16 s on this machine,
# all of it PyYAML's pure-Python scanner). The caller gets a copy of the data, as if read anew.
# Only documents that were read without error are kept; a refused one is refused again.
_READ: dict[str, tuple[Any, dict[PathKey, int]]] = {}
_READ_MAX = 128
_READ_MAX_CHARS = 1 << 20


def _read(text: str, path: Path) -> tuple[Any, dict[PathKey, int]]:
    node = _compose(text, path)
    loc = _Located()
    if node is None:
        raise InputError("file is empty", hint="see `envbuild show` for a complete example", where=f"{path}:1")
    try:
        # one constructor per document, for every scalar in it (a loader per scalar was ~1 s of
        # the 16 above)
        data = _walk(node, (), loc, yaml.constructor.SafeConstructor())
    except InputError as exc:
        exc.where = f"{path}:{exc.where.removeprefix('line ')}" if exc.where else str(path)
        raise
    return data, loc.lines


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
        # context: the data comes from a file a person wrote (models check names against what
        # is installed there, e.g. a benchmark's parser)
        return model.model_validate(data, context={"file": str(source)})
    except ValidationError as exc:
        errors = exc.errors()
        # An unknown field explains a "missing" one next to it (a misspelt key): report it first.
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        field_path = tuple(p for p in err["loc"]
                           if not (isinstance(p, str) and (p.startswith("function-") or p == "[key]")))
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
