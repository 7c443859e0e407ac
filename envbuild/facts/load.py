"""Read facts files written by ``envbuild facts --json -o FILE`` (one node or a list of nodes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from envbuild.errors import InputError
from envbuild.facts.model import FACTS_SCHEMA, NodeFacts
from envbuild.userfile import MAX_DEPTH, depth, read_text, too_deep

HINT = "produce it with envbuild facts --json -o FILE"


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}" if loc else err["msg"]


def parse_facts(text: str, source: str = "<facts>") -> list[NodeFacts]:
    """Validate facts JSON text (an object or a list of objects with schema envbuild.facts/1)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise too_deep(source, "facts file") from None
    except ValueError as exc:
        what = "XML (nvidia-smi -q -x output?)" if text.lstrip().startswith("<") else f"invalid JSON ({exc})"
        raise InputError(f"{source}: not a facts file: {what}; expected JSON with schema {FACTS_SCHEMA!r}", hint=HINT) from exc
    if depth(data) > MAX_DEPTH:
        raise too_deep(source, "facts file")
    docs = data if isinstance(data, list) else [data]
    if not docs:
        raise InputError(f"{source}: the facts list is empty; expected node facts with schema {FACTS_SCHEMA!r}", hint=HINT)
    out = []
    for i, doc in enumerate(docs):
        where = f"{source}[{i}]" if isinstance(data, list) else source
        schema = doc.get("schema") if isinstance(doc, dict) else None
        if schema != FACTS_SCHEMA:
            got = f"schema {schema!r}" if schema else f"a JSON {type(doc).__name__} without a 'schema' field"
            raise InputError(
                f"{where}: not an envbuild facts file: found {got}, expected schema {FACTS_SCHEMA!r}", hint=HINT
            )
        try:
            out.append(NodeFacts.model_validate(doc))
        except ValidationError as exc:
            raise InputError(f"{where}: invalid facts: {_first_error(exc)}", hint=HINT) from exc
    return out


def load_facts(path: str | os.PathLike) -> list[NodeFacts]:
    """Facts of every node in ``path``; raises InputError naming the file for anything else."""
    path = Path(path)
    return parse_facts(read_text(path, "facts file", hint=HINT), str(path))


def dump_facts(facts: list[NodeFacts], *, as_list: bool) -> str:
    """JSON text of ``facts``: one object, or a list when ``as_list`` (several hosts asked)."""
    docs = [json.loads(f.to_json()) for f in facts]
    return json.dumps(docs if as_list else docs[0], indent=2) + "\n"
