"""Find shipped or user-supplied YAML documents (recipes, targets) by name or path, and the
digest that says whether two of them are the same document (``digest``)."""

from __future__ import annotations

import difflib
import weakref
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from envbuild.errors import InputError
from envbuild.fsio import canonical_json, sha256_text
from envbuild.names import NAME_RULE, is_name
from envbuild.yamlsrc import load_yaml, validate

M = TypeVar("M", bound=BaseModel)

# how each loaded document of one's own was named on the command line (the path as given), by
# the identity of its model; an entry goes with its model
_GIVEN: dict[int, tuple[weakref.ref, str]] = {}


def given_as(model: BaseModel) -> str:
    """How a command line names ``model``: the path it was loaded from, as given, for a file
    of one's own (``./gpt-neox.yaml``); its name for a shipped one or a model made in code.

    The commands a hint or a header proposes use it, so that they work as printed
    (``envbuild lock ./gpt-neox.yaml``, where ``envbuild lock gpt-neox`` is an unknown recipe)."""
    entry = _GIVEN.get(id(model))
    if entry is not None and entry[0]() is model:
        return entry[1]
    return str(getattr(model, "name", ""))


def _remember(model: BaseModel, given: str) -> None:
    key = id(model)
    _GIVEN[key] = (weakref.ref(model, lambda _ref: _GIVEN.pop(key, None)), given)


def digest(model: BaseModel) -> str:
    """sha256 over the canonical JSON of a recipe or target model: what a lock records of the
    recipe and target it was made for, and what says a recipe is a shipped one unchanged.

    A model's ``DIGEST_EXCLUDE`` (a class attribute: field names, or a dict reaching nested
    fields as pydantic's ``exclude`` does) is left out: a target's ``jobs`` section says how
    jobs are submitted, not what the environment is."""
    exclude = getattr(type(model), "DIGEST_EXCLUDE", ())
    exclude = dict(exclude) if isinstance(exclude, dict) else set(exclude)  # a dict reaches nested fields
    return sha256_text(canonical_json(model.model_dump(mode="json", by_alias=True, exclude=exclude or None)))


def shipped(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.glob("*.yaml"), key=lambda p: p.stem)}  # by name: "a" before "a-b"


def resolve(name_or_path: str | Path, folder: Path, what: str) -> Path:
    """A shipped name ("polaris") or a path to a YAML file (one with a suffix or a '/')."""
    text = str(name_or_path)
    candidate = Path(text)
    if candidate.suffix in (".yaml", ".yml") or "/" in text:
        if not candidate.exists():
            raise InputError(f"{what} file {text} does not exist", hint="check the path")
        return candidate
    known = shipped(folder)
    if text in known:
        return known[text]
    if not is_name(text):
        raise InputError(f"{text!r} is not a valid {what} name ({NAME_RULE})",
                         hint=f"known {what}s: {', '.join(known)} (or pass a path to a YAML file)")
    close = [k for k in known if k.startswith(text)] or difflib.get_close_matches(text, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InputError(
        f"unknown {what} {text!r}",
        hint=f"{hint}known {what}s: {', '.join(known)} (or pass a path to a YAML file)",
    )


def load(model: type[M], name_or_path: str | Path, folder: Path, what: str) -> M:
    path = resolve(name_or_path, folder, what)
    data, loc = load_yaml(path)
    if not isinstance(data, dict):
        raise InputError(f"a {what} must be a mapping at the top level", where=f"{path}:1",
                         hint=f"see a shipped {what} for the layout")
    loaded = validate(model, data, path, loc)
    if path.resolve().parent != folder.resolve():  # one's own file: named by its path
        _remember(loaded, str(name_or_path))
    return loaded
