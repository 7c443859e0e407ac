"""The JSON Schemas shipped for recipes and targets (issue 40): generated from the models and
current, every shipped file valid under its schema and pointing an editor at it, and a
mistake an editor should flag is flagged."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from envbuild.jsonschemas import SCHEMA_FILES, schema_text
from envbuild.recipes import all_recipes
from envbuild.shipped import RECIPES, TARGETS


@pytest.mark.parametrize("kind", sorted(SCHEMA_FILES))
def test_the_shipped_schema_is_the_models(kind):
    assert SCHEMA_FILES[kind].read_text() == schema_text(kind), (
        f"{SCHEMA_FILES[kind]} is stale: python -m envbuild.jsonschemas")


@pytest.mark.parametrize("kind,folder", [("recipe", RECIPES), ("target", TARGETS)])
def test_every_shipped_file_is_valid_and_names_its_schema(kind, folder):
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILES[kind].read_text()))
    files = sorted(folder.glob("*.yaml"))
    assert files
    for f in files:
        text = f.read_text()
        assert text.startswith(f"# yaml-language-server: $schema=../{kind}.schema.json\n"), f
        errors = sorted(validator.iter_errors(yaml.safe_load(text)), key=str)
        assert not errors, (f, [e.message for e in errors][:3])


def test_a_mistake_is_flagged_where_an_editor_shows_it():
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILES["recipe"].read_text()))
    data = json.loads(all_recipes()[0].model_dump_json(by_alias=True, exclude_none=True))
    data["packages"][0]["verison"] = "1.0"  # a typo: not a field
    data["python"] = 3.11  # a number, not a string
    messages = [e.message for e in validator.iter_errors(data)]
    assert any("verison" in m for m in messages) and any("3.11" in m for m in messages), messages
