"""Knowledge a site or a user adds without editing envbuild (issue 49, item 3):

* the port tables (fixes, torch builds, node stacks, packages) read folders named by
  ``ENVBUILD_KNOWLEDGE_PATH`` or by an installed package's ``envbuild.knowledge`` entry point,
  after the shipped rows; an id that repeats one already given is refused, naming both files;
* a recipe handles one of its own deviations with a patch it carries (``handled_by:
  [patch:<id>]``): handled, not OPEN, and a patch it does not carry is refused when it loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envbuild.errors import InputError
from envbuild.port import tables
from envbuild.shipped import RECIPES

SITE_FIX = {
    "id": "site-np-bool-alias",
    "breaks": "`np.bool` raises AttributeError: NumPy 1.24 removed the alias (np.bool_ is the type)",
    "source": "https://numpy.org/devdocs/release/1.24.0-notes.html#expired-deprecations",
    "when": [{"numpy": ">=1.24"}],
    "files": ["*.py"],
    "scope": "code",
    "grep": "np.bool)",
    "pattern": "np\\.bool\\)",
    "replace": "np.bool_)",
    "example": {"before": "x = a.astype(np.bool)\n", "after": "x = a.astype(np.bool_)\n"},
}


def site(tmp_path: Path, rows: list[dict]) -> Path:
    folder = tmp_path / "site-knowledge"
    folder.mkdir()
    shipped = yaml.safe_load((tables.DATA / "fixes.yaml").read_text())
    (folder / "fixes.yaml").write_text(yaml.safe_dump({"schema": shipped["schema"], "fixes": rows}, sort_keys=False))
    return folder


def test_a_site_folder_adds_fix_rows_after_the_shipped_ones(tmp_path, monkeypatch):
    shipped = tables.fixes()
    monkeypatch.setenv(tables.KNOWLEDGE_PATH, str(site(tmp_path, [SITE_FIX])))
    rows = tables.fixes()
    assert rows[:len(shipped)] == shipped and rows[-1].id == "site-np-bool-alias"
    assert tables.folders()[-1] == tmp_path / "site-knowledge"


def test_a_site_row_never_replaces_a_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setenv(tables.KNOWLEDGE_PATH, str(site(tmp_path, [{**SITE_FIX, "id": "torch-six-inf"}])))
    with pytest.raises(InputError) as err:
        tables.fixes()
    assert "torch-six-inf" in str(err.value) and "site-knowledge/fixes.yaml" in str(err.value)
    assert str(tables.DATA / "fixes.yaml") in str(err.value)


def test_a_path_that_is_not_a_folder_is_refused_by_the_command(tmp_path):
    env = {**os.environ, tables.KNOWLEDGE_PATH: str(tmp_path / "nowhere")}
    got = subprocess.run([sys.executable, "-m", "envbuild", "port", "alpa-megatron", "--target", "h100-venv"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 2 and "ENVBUILD_KNOWLEDGE_PATH names" in got.stderr and "Traceback" not in got.stderr


def test_an_installed_package_adds_a_folder_by_entry_point(tmp_path, monkeypatch):
    folder = site(tmp_path, [SITE_FIX])
    dist = tmp_path / "sitepkg" / "siteknow-1.0.dist-info"
    dist.mkdir(parents=True)
    (tmp_path / "sitepkg" / "siteknow.py").write_text(f"FOLDER = {str(folder)!r}\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: siteknow\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[envbuild.knowledge]\nsite = siteknow:FOLDER\n")
    monkeypatch.syspath_prepend(str(tmp_path / "sitepkg"))
    monkeypatch.delenv(tables.KNOWLEDGE_PATH, raising=False)
    assert folder in tables.folders() and tables.fixes()[-1].id == "site-np-bool-alias"


def own_patch_recipe(tmp_path: Path, patch_id: str) -> Path:
    data = yaml.safe_load((RECIPES / "alpa-megatron-h100.yaml").read_text())
    data["name"] = "alpa-megatron-mine"
    data.pop("variant_of", None)
    data["deviations"] = [{
        "id": "my-own-fix", "published": "megatron/training.py as published",
        "problem": "the embedding all-reduce is guarded by a literal False in the published fork",
        "instead": "the recipe's own patch documents that state", "handled_by": [f"patch:{patch_id}"]}]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_deviation_the_recipe_handles_with_its_own_patch_is_handled_not_open(tmp_path):
    from envbuild.recipes import load_recipe

    path = own_patch_recipe(tmp_path, "tie-embedding-disabled")
    (dev,) = load_recipe(path).deviations
    assert dev.state == "handled" and not dev.test
    shown = subprocess.run([sys.executable, "-m", "envbuild", "show", str(path)], capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "own patch" in shown.stdout and "OPEN" not in shown.stdout


def test_a_deviation_naming_a_patch_the_recipe_does_not_carry_is_refused(tmp_path):
    path = own_patch_recipe(tmp_path, "no-such-patch")
    got = subprocess.run([sys.executable, "-m", "envbuild", "show", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert got.returncode == 2 and "no patch 'no-such-patch'" in got.stderr and f"{path}:" in got.stderr


def test_a_site_adds_an_apex_commit_that_port_and_check_then_know(tmp_path, monkeypatch):
    from envbuild.compat import commits
    from envbuild.recipes.schema import GitSource

    folder = tmp_path / "site"
    folder.mkdir()
    sha = "1" * 40
    (folder / "apex_commits.yaml").write_text(yaml.safe_dump({"schema": 1, "commits": [
        {"sha": sha, "date": "2026-09-01", "note": "our site's Apex", "source": "https://example.org/apex/commit/1111"}]}))
    src = GitSource(name="apex", url="https://github.com/NVIDIA/apex", ref="master", sha=sha, install="apex", why="site")
    assert commits.apex_commit(src)[0] is None  # not known without the site's folder
    monkeypatch.setenv("ENVBUILD_KNOWLEDGE_PATH", str(folder))
    row, said = commits.apex_commit(src)
    assert row is not None and row.date == "2026-09-01" and "(2026-09-01)" in said
    from envbuild.port.apex import candidates
    assert candidates(None)[-1].sha == sha  # the newest known commit, for port
    (folder / "apex_commits.yaml").write_text(yaml.safe_dump({"schema": 1, "commits": [
        {"sha": commits.APEX_MASTER.sha, "date": "2026-09-01", "note": "again", "source": "x"}]}))
    with pytest.raises(InputError, match="already known"):
        commits.apex_commits()


FORK = "https://github.com/ROCm/apex"


def test_a_site_adds_a_repository_envbuild_builds_and_draft_then_uses_its_builder(tmp_path, monkeypatch):
    """Which repositories draft writes as ``install: apex`` is a table (envbuild/draft/data/
    builders.yaml): NVIDIA's Apex ships; a site's row adds a fork built the same way, and draft
    then writes the fork's git install with envbuild's Apex builder and its --global-option values;
    a row naming a repository the table already has is refused, naming both files."""
    from envbuild.draft import builders
    from support.clirun import envbuild

    assert [(b.url, b.install) for b in builders.builders()] == [("https://github.com/nvidia/apex", "apex")]
    assert builders.builder_of(FORK + ".git") is None
    folder = tmp_path / "site-knowledge"
    folder.mkdir()
    row = {"url": FORK, "install": "apex", "why": "the ROCm fork keeps Apex's setup.py options",
           "source": "https://github.com/ROCm/apex/blob/master/README.md"}
    (folder / "builders.yaml").write_text(yaml.safe_dump({"schema": 1, "builders": [row]}))
    monkeypatch.setenv(tables.KNOWLEDGE_PATH, str(folder))
    assert builders.builder_of(FORK + ".git/").install == "apex"

    repo = tmp_path / "setup"
    repo.mkdir()
    (repo / "README.md").write_text("# a setup\n\n```bash\npip install --global-option=--cpp_ext "
                                    f"git+{FORK}.git@{'1' * 40}\n```\n")
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                              "commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True)
    res = envbuild("draft", str(repo), "--ref", "main", "--json")
    assert res.returncode == 0, res.stderr
    drafted = {s["url"]: s for s in yaml.safe_load(__import__("json").loads(res.stdout)["text"])["sources"]}
    assert (drafted[FORK]["install"], drafted[FORK]["build_options"]) == ("apex", ["--cpp_ext"])

    (folder / "builders.yaml").write_text(yaml.safe_dump({"schema": 1, "builders": [
        {**row, "url": "https://github.com/NVIDIA/apex.git"}]}))
    with pytest.raises(InputError) as err:
        builders.builders()
    assert "https://github.com/nvidia/apex" in str(err.value) and str(builders.DATA / "builders.yaml") in str(err.value)
