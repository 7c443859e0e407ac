"""Re-locking keeps the existing lock's pins (uv's semantics, issue 40): pure parts, then real uv
against PyPI."""

from __future__ import annotations

import json

import pytest

from envbuild.lock.keep import PinChange, Upgrade, pin_changes, preferences
from envbuild.lock.make import write_lock
from envbuild.lock.serialize import read_lock
from envbuild.lock.uvresolve import exact_pins
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target
from support import paths
from support.paths import ROOT

DATA = paths.DATA / "lock"  # the lab target of tests/lock/test_lock_resolve.py


def _recipe(tqdm: str, as_of: str) -> Recipe:
    return Recipe.model_validate({
        "schema": 1, "name": "tiny", "title": "t", "description": "d",
        "published": {"url": "https://example.org"}, "python": "3.11", "targets": ["lab"],
        "resolve_as_of": as_of,
        "packages": [{"name": "tqdm", "version": tqdm, "why": "test"},
                     {"name": "requests", "version": ">=2", "why": "test"}]})


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "envbuild-cache"))


def _pins(lock) -> dict[str, str]:
    return {p.name.lower(): p.version for p in lock.packages}


def test_exact_pins_reads_uvs_requirements_output():
    text = ("certifi==2024.12.14\n    # via requests\nrequests[socks]==2.32.3\n    # via -r recipe.in\n"
            "torch==2.13.0+cpu\n    # via -r recipe.in\n# a comment==1\n")
    assert exact_pins(text) == ["certifi==2024.12.14", "requests==2.32.3", "torch==2.13.0+cpu"]


def test_preferences_leave_out_what_is_upgraded_and_what_is_preinstalled():
    lock = read_lock(ROOT / "lockfiles" / "cpu-reference" / "local.lock")
    every = preferences(lock, Upgrade())
    assert every and all(every[k] == v for k, v in _pins(lock).items() if k in every)
    assert preferences(lock, Upgrade(everything=True)) == {}
    assert preferences(None, Upgrade()) == {}
    one = next(iter(every))
    assert one not in preferences(lock, Upgrade.of(False, [one.upper()]))
    assert len(preferences(lock, Upgrade.of(False, [one]))) == len(every) - 1


def test_pin_changes_name_added_removed_and_moved_pins_with_why():
    old = read_lock(ROOT / "lockfiles" / "cpu-reference" / "local.lock")
    pkgs = list(old.packages)
    top = next(p for p in pkgs if p.requested is not None)
    dep = next(p for p in pkgs if p.requested is None and p.required_by)
    gone = next(p for p in pkgs if p.requested is None and p is not dep)
    new_pkgs = [p.model_copy(update={"version": "9.9", "requested": "==9.9"}) if p is top else
                p.model_copy(update={"version": "8.8"}) if p is dep else p for p in pkgs if p is not gone]
    new_pkgs.append(dep.model_copy(update={"name": "brand-new", "required_by": [top.name]}))
    new = old.model_copy(update={"packages": new_pkgs})
    got = {c.name: c for c in pin_changes(old, new, Upgrade())}
    assert got[top.name].why == "the recipe asks ==9.9" and got[top.name].new == "9.9"
    assert got[dep.name].why == f"required by {', '.join(dep.required_by)}, whose new pin needs it"
    assert got[gone.name].new is None and got[gone.name].why == "no locked package requires it any more"
    assert got["brand-new"].old is None and got["brand-new"].why == f"required by {top.name}"
    assert got["brand-new"].line() == f"brand-new {dep.version} added (required by {top.name})"
    assert pin_changes(None, new, Upgrade()) == [] and pin_changes(old, old, Upgrade()) == []


@pytest.mark.integration
def test_a_one_pin_change_moves_one_pin_and_says_why(tmp_path):
    """The issue's case in small: tqdm's pin changes and the recipe's resolve_as_of moves on (so
    a resolution afresh would move requests and its dependencies too); the re-lock moves tqdm
    alone and says the recipe asked; --upgrade-package certifi moves certifi alone; --upgrade
    moves the rest."""
    lab, path = load_target(DATA / "lab.yaml"), tmp_path / "tiny.lock"
    first, changed, moves = write_lock(_recipe("==4.64.1", "2023-01-15"), lab, path)
    assert changed and moves == []
    before = _pins(first)
    edited = _recipe("==4.66.1", "2025-01-15")
    lock, changed, moves = write_lock(edited, lab, path)
    after = _pins(lock)
    assert changed and after["tqdm"] == "4.66.1"
    assert {k: v for k, v in after.items() if k != "tqdm"} == {k: v for k, v in before.items() if k != "tqdm"}
    assert moves == [PinChange("tqdm", "4.64.1", "4.66.1", "the recipe asks ==4.66.1")]
    assert _pins(read_lock(path)) == after

    lock, _, moves = write_lock(edited, lab, path, upgrade=Upgrade.of(False, ["certifi"]))
    assert [m.name.lower() for m in moves] == ["certifi"] and moves[0].why == "--upgrade-package"
    assert moves[0].old == before["certifi"] and moves[0].new != before["certifi"]

    fresh, _, moves = write_lock(edited, lab, path, upgrade=Upgrade(everything=True))
    moved = {m.name.lower() for m in moves}
    assert "requests" in moved and all(m.why == "--upgrade" for m in moves)


@pytest.mark.integration
def test_the_command_prints_and_reports_the_moves(tmp_path, monkeypatch):
    """`envbuild lock FILE --target T` on an edited recipe file: the moved pin on stderr and in
    --json's `moved`; --upgrade with --check is refused with exit 2."""
    import yaml

    from support.clirun import envbuild

    target = tmp_path / "lab.yaml"
    target.write_text((DATA / "lab.yaml").read_text())
    rec = tmp_path / "tiny.yaml"
    data = _recipe("==4.64.0", "2023-01-15").model_dump(mode="json", exclude_none=True, by_alias=True)
    rec.write_text(yaml.safe_dump(data))
    out = tmp_path / "tiny.lock"
    r = envbuild("lock", rec, "--target", target, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    data["packages"][0]["version"] = "==4.64.1"
    rec.write_text(yaml.safe_dump(data))
    r = envbuild("lock", rec, "--target", target, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)["results"][0]
    assert result["moved"] == [{"name": "tqdm", "old": "4.64.0", "new": "4.64.1", "why": "the recipe asks ==4.64.1"}]
    assert "tqdm 4.64.0 -> 4.64.1 (the recipe asks ==4.64.1)" in r.stderr
    r = envbuild("lock", rec, "--target", target, "--check", "--upgrade")
    assert r.returncode == 2 and "--upgrade" in r.stderr and "Traceback" not in r.stderr
