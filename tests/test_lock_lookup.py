"""Where a lock is found: the locks shipped in the package, never the working directory.

Lookup (README "Lockfiles"): ``--lock FILE``; else ``--lockdir`` / ``$ENVBUILD_LOCKDIR``; else
the locks shipped in ``envbuild/lockfiles``. A shipped recipe whose lock is missing is an error,
never a silent resolution over the network.
"""

from __future__ import annotations

import shutil

import pytest

from envbuild.cli import main
from envbuild.errors import CheckFailed
from envbuild.inputs import find_lock
from envbuild.lock import location as lockmake
from envbuild.lock.location import LOCKDIR_ENV, SHIPPED_LOCKDIR, locate_lock
from envbuild.provision import ProvisionOptions, take_lock
from envbuild.recipes import DATA, default_recipe, is_shipped, load_recipe
from envbuild.targets import load_target


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory outside the checkout, with no lockdir in the environment."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv(LOCKDIR_ENV, raising=False)
    return cwd


def test_shipped_locks_are_found_from_any_folder(elsewhere, capsys):
    rec = default_recipe()
    tgt = load_target(rec.targets[0])
    path = locate_lock(rec.name, tgt.name)
    assert path.is_file() and path.is_relative_to(SHIPPED_LOCKDIR)
    assert find_lock(rec, tgt) is not None
    assert main(["lock", rec.name, "--target", tgt.name, "--check"]) == 0, capsys.readouterr().err
    assert not (elsewhere / "lockfiles").exists()


def test_lockdir_from_the_environment_comes_first_and_falls_back_to_the_shipped(elsewhere, tmp_path, monkeypatch):
    rec = default_recipe()
    mine = tmp_path / "mine"
    monkeypatch.setenv(LOCKDIR_ENV, str(mine))
    shipped = SHIPPED_LOCKDIR / rec.name / f"{rec.targets[0]}.lock"
    assert locate_lock(rec.name, rec.targets[0]) == shipped  # none of mine: the shipped one
    (mine / rec.name).mkdir(parents=True)
    shutil.copy(shipped, mine / rec.name / shipped.name)
    assert locate_lock(rec.name, rec.targets[0]) == mine / rec.name / shipped.name
    assert locate_lock(rec.name, rec.targets[0], tmp_path / "other") == shipped  # --lockdir wins over the env


def test_a_shipped_recipe_without_its_lock_is_refused_not_relocked(elsewhere, tmp_path, monkeypatch):
    # an installation that lost envbuild/lockfiles: the shipped folder points at an empty one
    monkeypatch.setattr(lockmake, "SHIPPED_LOCKDIR", tmp_path / "empty")
    rec = default_recipe()
    tgt = load_target(rec.targets[0])
    assert is_shipped(rec)
    said: list[str] = []
    with pytest.raises(CheckFailed) as err:
        take_lock(ProvisionOptions(target=tgt.name), rec, tgt, said.append)
    assert "no lockfile for the shipped recipe" in err.value.message
    assert LOCKDIR_ENV in err.value.message and "--lockdir" in err.value.hint
    assert said == []  # nothing was resolved


def test_a_changed_copy_of_a_shipped_recipe_is_not_shipped(tmp_path):
    rec = default_recipe()
    path = tmp_path / f"{rec.name}.yaml"
    text = (DATA / f"{rec.name}.yaml").read_text()
    assert rec.title in text
    path.write_text(text.replace(rec.title, rec.title + " (mine)", 1))
    assert not is_shipped(load_recipe(str(path)))


def test_an_installed_envbuild_writes_its_locks_under_envbuild_home(tmp_path, monkeypatch) -> None:
    """From site-packages, ``envbuild lock`` writes to $ENVBUILD_HOME/locks (a pip upgrade would
    drop a lock written into the package); from a source checkout, into envbuild/lockfiles."""
    from envbuild.lock import location as make

    monkeypatch.delenv("ENVBUILD_LOCKDIR", raising=False)
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    assert make.default_lockdir() == make.SHIPPED_LOCKDIR and not make.installed_package()
    site = tmp_path / "lib" / "python3.11" / "site-packages" / "envbuild" / "lockfiles"
    monkeypatch.setattr(make, "SHIPPED_LOCKDIR", site)
    assert make.installed_package(site) and make.default_lockdir() == tmp_path / "home" / "locks"
    assert make.default_lockdir(tmp_path / "mine") == tmp_path / "mine"  # --lockdir still wins
