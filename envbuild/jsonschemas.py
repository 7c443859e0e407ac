"""JSON Schemas of the files users write (recipes, targets), generated from their models and
shipped beside them, so that an editor completes and checks a recipe as it is typed
(``# yaml-language-server: $schema=...`` at the top of the file; docs/recipes.md says how).

``schema_text(kind)`` is the stable text (sorted keys); ``SCHEMA_FILES`` where each one is
shipped; tests/recipes/test_jsonschemas.py fails when a model changes and its file was not written
again (``python -m envbuild.jsonschemas`` writes them), and validates every shipped recipe and
target against its file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA_FILES = {"recipe": HERE / "recipes" / "recipe.schema.json",
                "target": HERE / "targets" / "target.schema.json"}
TITLES = {"recipe": "envbuild recipe (schema 1)", "target": "envbuild target profile (schema 1)"}


def _model(kind: str):
    if kind == "recipe":
        from envbuild.recipes.schema import Recipe

        return Recipe
    if kind == "target":
        from envbuild.targets.schema import Target

        return Target
    raise ValueError(f"no schema for {kind!r}")


def schema(kind: str) -> dict:
    """The JSON Schema of ``kind`` (validation mode: what a file may hold)."""
    out = _model(kind).model_json_schema(by_alias=True, mode="validation")
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["title"] = TITLES[kind]
    return out


def schema_text(kind: str) -> str:
    return json.dumps(schema(kind), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write every shipped schema file (after a model changed)."""
    from envbuild.fsio import write_atomic

    for kind, path in SCHEMA_FILES.items():
        write_atomic(path, schema_text(kind))
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
