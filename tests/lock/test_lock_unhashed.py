"""What the published locks could not hash is said in each lock and in docs/unhashed.md, with the
maintainer's commands that fill it (issue 53, item 9), and neither goes stale: the page is made
again here from the shipped locks and compared (regenerate with
``ENVBUILD_UPDATE_GOLDEN=1 python -m pytest tests/lock/test_lock_unhashed.py``), and every shipped lock
is the text ``dump_lock`` writes for its model, header included. That the commands fill the lock
is followed in tests/bundle/test_bundle_hints.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envbuild.lock.serialize import dump_lock, read_lock
from envbuild.lock.unhashed import fill_command, header_command, page, unhashed
from envbuild.recipes import all_recipes
from support.paths import ROOT

LOCKDIR = ROOT / "lockfiles"
DOC = ROOT / "docs" / "unhashed.md"
PAIRS = [(r.name, t) for r in all_recipes() for t in r.targets]


def _shipped():
    for recipe, target in PAIRS:
        path = LOCKDIR / recipe / f"{target}.lock"
        yield recipe, target, read_lock(path), header_command(path.read_text())


def test_the_page_is_made_from_the_shipped_locks() -> None:
    text = page(_shipped())
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        DOC.write_text(text)
    assert text == DOC.read_text(), f"rerun with ENVBUILD_UPDATE_GOLDEN=1 and review the diff of {DOC}"


@pytest.mark.parametrize(("recipe", "target"), PAIRS, ids=[f"{r}/{t}" for r, t in PAIRS])
def test_each_lock_is_the_text_its_model_writes(recipe: str, target: str) -> None:
    """A lock whose header's account of unhashed files differs from its entries is stale text."""
    path = LOCKDIR / recipe / f"{target}.lock"
    text = path.read_text()
    assert dump_lock(read_lock(path), header_command(text)) == text, \
        f"{path}: rewrite it with dump_lock (its body is unchanged), or run `envbuild lock {recipe} --target {target}`"


def test_the_lock_names_the_file_why_and_the_commands_that_fill_it() -> None:
    path = LOCKDIR / "alpa-megatron" / "azure-nd96.lock"
    head = path.read_text().split("schema: envbuild.lock/1", 1)[0]
    assert "# NOT HASHED here: 1 file(s)" in head
    assert ("torch 1.8.2+cu111: the cp38 wheel of torch 1.8.2+cu111 for linux_x86_64 on "
            "https://download.pytorch.org/whl/lts/1.8/torch_lts.html") in head
    assert "why: index download.pytorch.org unreachable from here" in head
    assert ("python -m pip download --no-deps --only-binary=:all: --python-version 3.8 --platform linux_x86_64 "
            "--find-links https://download.pytorch.org/whl/lts/1.8/torch_lts.html -d WHEELS torch==1.8.2+cu111") in head
    assert "envbuild lock alpa-megatron --target azure-nd96 --git-mirror DIR --wheelhouse WHEELS" in head
    # a lock with every file says nothing of the kind
    assert "NOT HASHED" not in (LOCKDIR / "cpu-reference" / "local.lock").read_text()


def test_the_page_lists_every_unhashed_file_of_every_published_lock() -> None:
    doc = DOC.read_text()
    found = [(r, t, u) for r, t, lock, _ in _shipped() for u in unhashed(lock)]
    assert found, "the shipped locks hash every file: the page would list nothing"
    for recipe, target, u in found:
        section = doc.split(f"## {recipe} on {target}\n", 1)[1].split("\n## ", 1)[0]
        assert f"**{u.name} {u.version}**" in section and u.download in section and u.why in section
    kinds = {u.kind for _, _, u in found}
    assert kinds == {"missing", "stand-in"}, kinds  # opt-175b-azure/local: PyPI's 1.10.1 for 1.10.1+cpu


def test_fill_command_keeps_the_lock_options_and_adds_the_wheelhouse() -> None:
    assert fill_command("envbuild lock r --target t") == "envbuild lock r --target t --wheelhouse WHEELS"
    assert fill_command("envbuild lock r --target t --wheelhouse DIR") == "envbuild lock r --target t --wheelhouse WHEELS"


def test_lock_check_prints_the_commands_and_returns_them_as_json() -> None:
    p = subprocess.run([sys.executable, "-m", "envbuild", "lock", "opt-175b-azure", "--target", "azure-nd96",
                        "--check", "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    (entry,) = json.loads(p.stdout)["results"]
    (note,) = entry["unhashed"]
    assert note.startswith("torch 1.10.1+cu113 not hashed (no file: index download.pytorch.org unreachable")
    assert note.endswith("then envbuild lock opt-175b-azure --target azure-nd96 --git-mirror DIR --wheelhouse WHEELS")
    assert note in " ".join(p.stderr.split())
