"""`envbuild recipes` and `envbuild show` through the real CLI entry point."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from envbuild.cli import main
from envbuild.recipes import DATA, all_recipes, load_recipe, recipe_names
from envbuild.recipes.schema import Recipe
from support.paths import ROOT



def test_recipes_json_lists_every_shipped_recipe_with_one_default(capsys):
    assert main(["recipes", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == sorted(recipe_names())
    assert [r["name"] for r in rows if r["default"]] == ["cpu-reference"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["opt-175b-azure"]["environment"] == "conda"
    assert by_name["polaris-megatron-deepspeed"]["targets"] == ["polaris"]


def test_recipes_table_marks_the_default(capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    assert "cpu-reference *" in out and "* default recipe" in out
    for r in all_recipes():
        assert r.name[:10] in out


def test_show_json_is_the_full_recipe(capsys):
    for name in recipe_names():
        assert main(["show", name, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["schema"] == 1
        assert Recipe.model_validate(data) == load_recipe(name)


def test_show_summary_has_pins_sources_patches_deviations_and_benchmark(capsys, monkeypatch):
    from envbuild.cli.output import console

    monkeypatch.setattr(console, "width", 2000)  # one table row per line, no folded cells
    for name in ("alpa-megatron", "opt-175b-azure", "megatronapp"):
        r = load_recipe(name)
        assert main(["show", name]) == 0
        out = capsys.readouterr().out
        for src in r.sources:
            assert src.sha in out and src.why.split(".")[0] in out
        for pkg in r.packages:
            assert re.search(rf"│ {re.escape(pkg.name)} +│ {re.escape(pkg.version)}", out), pkg.name
        for item in [*r.patches, *r.deviations]:
            assert f"│ {item.id} " in out
        assert r.benchmark.command in out
        assert "deviations from the published instructions" in out
        for folder in r.benchmark.fresh:  # what a run deletes is said before it runs
            assert f"removed before each run: {folder.path} (" in out
    assert "2.1.0a0+fe05266f [cu121] (preinstalled)" in out  # rich markup in data is escaped


def test_show_and_recipes_accept_a_path(tmp_path, capsys):
    data = yaml.safe_load((DATA / "cpu-reference.yaml").read_text())
    data["name"], data["default"] = "my-copy", False
    path = tmp_path / "my-copy.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["show", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "my-copy"
    assert main(["recipes", str(path), "alpa-megatron", "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["my-copy", "alpa-megatron"]


def test_show_schema_is_json_schema(capsys):
    assert main(["show", "--schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"packages", "sources", "benchmark", "deviations", "schema"} <= set(schema["properties"])


def test_show_without_recipe_is_bad_input(capsys):
    assert main(["show"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "hint: " in err


@pytest.mark.process
def test_console_script_runs_from_a_fresh_process(tmp_path):
    """The installed entry point (or python -m) in a clean process, from another directory."""
    exe = shutil.which("envbuild")
    cmd = [exe] if exe else [sys.executable, "-m", "envbuild"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([*cmd, "recipes", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert {r["name"] for r in json.loads(proc.stdout)} == set(recipe_names())
