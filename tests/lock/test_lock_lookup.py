"""Where a lock is found: the shipped locks, never the working directory; where one is written.

Lookup (docs/recipes.md, "Lockfiles"): ``--lock FILE``; else ``--lockdir`` / ``$ENVBUILD_LOCKDIR``; else, in
a checkout, its ``lockfiles/`` (the shipped locks), and for an installed envbuild
``$ENVBUILD_HOME/locks``, then the shipped locks (``envbuild/lockfiles`` in the wheel). A shipped
recipe whose lock is missing is an error, never a silent resolution over the network. Where
``envbuild lock`` writes: the same folder, never into the installed package.
"""

from __future__ import annotations

import json
import shutil

import pytest

from envbuild.cli import main
from envbuild.errors import CheckFailed, InputError
from envbuild.inputs import find_lock
from envbuild.lock import location as lockmake, make
from envbuild.lock.location import LOCKDIR_ENV, SHIPPED_LOCKDIR, locate_lock, lock_path, writable_lock
from envbuild.provision import ProvisionOptions, take_lock
from envbuild.recipes import DATA, default_recipe, is_shipped, load_recipe
from envbuild.shipped import CHECKOUT, LOCKFILES, PACKAGE
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
    # an installation that lost its shipped locks: the shipped folder points at an empty one
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


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """envbuild as a wheel installs it: the shipped locks inside the package in site-packages
    (a copy of the default recipe's lock), $ENVBUILD_HOME in tmp, no lockdir in the environment."""
    package = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "envbuild"
    rec = default_recipe()
    lock = f"{rec.name}/{rec.targets[0]}.lock"
    (package / "lockfiles" / rec.name).mkdir(parents=True)
    shutil.copy(SHIPPED_LOCKDIR / lock, package / "lockfiles" / lock)
    monkeypatch.setattr(lockmake, "PACKAGE", package)
    monkeypatch.setattr(lockmake, "SHIPPED_LOCKDIR", package / "lockfiles")
    monkeypatch.setattr(lockmake, "INSTALLED", True)
    monkeypatch.delenv(LOCKDIR_ENV, raising=False)
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(make, "make_lock", _never_resolved)
    return package


def _never_resolved(*args, **kwargs):
    raise AssertionError("a lock was resolved")


def test_a_checkout_writes_its_locks_into_its_lockfiles(monkeypatch):
    """From a source checkout ``envbuild lock`` writes the shipped locks, lockfiles/ at its top,
    and never into the package folder."""
    monkeypatch.delenv(LOCKDIR_ENV, raising=False)
    assert not lockmake.INSTALLED and lockmake.default_lockdir() == LOCKFILES == CHECKOUT / "lockfiles"
    assert writable_lock(lock_path("cpu-reference", "local")) == LOCKFILES / "cpu-reference" / "local.lock"
    with pytest.raises(InputError) as err:
        writable_lock(PACKAGE / "lockfiles" / "cpu-reference" / "local.lock")
    assert "inside envbuild's package folder" in err.value.message
    # the library refuses it too, before resolving anything
    monkeypatch.setattr(make, "make_lock", _never_resolved)
    rec = default_recipe()
    with pytest.raises(InputError):
        make.write_lock(rec, load_target(rec.targets[0]), PACKAGE / "mine.lock")
    assert not (PACKAGE / "mine.lock").exists()


def test_an_installed_envbuild_writes_its_locks_under_envbuild_home(installed, tmp_path):
    """From site-packages, ``envbuild lock`` writes to $ENVBUILD_HOME/locks (the next install or
    upgrade would drop a lock written into the package); --lockdir still wins."""
    assert lockmake.default_lockdir() == tmp_path / "home" / "locks"
    assert lockmake.default_lockdir(tmp_path / "mine") == tmp_path / "mine"
    rec = default_recipe()
    assert locate_lock(rec.name, rec.targets[0]) == installed / "lockfiles" / rec.name / f"{rec.targets[0]}.lock"


@pytest.mark.parametrize("where", ["--lockdir", "-o"])
def test_a_lock_is_never_written_into_the_installed_package(installed, where, capsys):
    rec = default_recipe()
    dest = installed / "lockfiles" if where == "--lockdir" else installed / "mine.lock"
    before = sorted(installed.rglob("*"))
    assert main(["lock", rec.name, "--target", rec.targets[0], where, str(dest)]) == 2  # refused, not resolved
    err = capsys.readouterr().err
    assert "inside the installed envbuild package" in err and "--lockdir DIR" in err, err
    assert sorted(installed.rglob("*")) == before


def test_an_installed_envbuild_checks_the_lock_provision_takes(installed, tmp_path, capsys):
    """``lock --check`` reads the lock provision would use: the shipped one, when
    $ENVBUILD_HOME/locks has none (not a "no lockfile" there)."""
    rec = default_recipe()
    assert main(["lock", rec.name, "--target", rec.targets[0], "--check", "--json"]) == 0, capsys.readouterr().err
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["ok"] and result["path"] == str(installed / "lockfiles" / rec.name / f"{rec.targets[0]}.lock")
    assert not (tmp_path / "home").exists()
