"""`envbuild lock` end to end: real git mirror, real uv, byte-stable files, --check, bad input."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.lock import read_lock
from support import paths

pytestmark = pytest.mark.integration

DATA = paths.DATA / "lock"
LAB = str(DATA / "lab.yaml")


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org",
               GIT_AUTHOR_DATE="2022-05-04T08:46:00Z", GIT_COMMITTER_DATE="2022-05-04T08:46:00Z")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def setup(tmp_path, monkeypatch, tmp_path_factory):
    """A mirror with acme/widget (main = base, feature = base + 1) and a recipe pinning it."""
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "envbuild-cache"))
    monkeypatch.delenv("ENVBUILD_GIT_MIRROR", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "a").write_text("a\n")
    _git("add", "a", cwd=work)
    _git("commit", "-qm", "base", cwd=work)
    base = _git("rev-parse", "HEAD", cwd=work)
    _git("checkout", "-qb", "feature", cwd=work)
    (work / "b").write_text("b\n")
    _git("add", "b", cwd=work)
    _git("commit", "-qm", "fork change", cwd=work)
    head = _git("rev-parse", "HEAD", cwd=work)
    _git("checkout", "-q", "main", cwd=work)
    (work / "c").write_text("c\n")
    _git("add", "c", cwd=work)
    _git("commit", "-qm", "upstream moves on", cwd=work)
    off = _git("rev-parse", "HEAD", cwd=work)  # on main, not on feature
    mirror = tmp_path / "mirror"
    (mirror / "acme").mkdir(parents=True)
    _git("clone", "-q", "--bare", str(work), str(mirror / "acme" / "widget.git"), cwd=tmp_path)
    recipe = tmp_path / "tiny.yaml"

    def write(six: str = "1.16.0", sha: str = head) -> Path:
        text = (DATA / "recipe.yaml.in").read_text()
        for key, value in {"{sha}": sha, "{base}": base, "{python}": "3.9", "{six}": six}.items():
            text = text.replace(key, value)
        recipe.write_text(text)
        return recipe

    write()
    return {"recipe": recipe, "write": write, "mirror": mirror, "base": base, "head": head, "off": off,
            "lockdir": tmp_path / "locks", "lockfile": tmp_path / "locks" / "tiny" / "lab.lock"}


def _lock(setup, *extra: str) -> int:
    return main(["lock", str(setup["recipe"]), "--target", LAB, "--lockdir", str(setup["lockdir"]), *extra])


def test_lock_is_byte_stable_and_checks(setup, capsys):
    assert _lock(setup, "--git-mirror", str(setup["mirror"])) == 0
    first = setup["lockfile"].read_bytes()
    assert first.startswith(b"# DO NOT EDIT")
    assert b"envbuild lock tiny --target lab --git-mirror DIR" in first
    assert _lock(setup, "--git-mirror", str(setup["mirror"])) == 0
    assert setup["lockfile"].read_bytes() == first
    lock = read_lock(setup["lockfile"])
    assert lock.git_pin("widget").verified and lock.git_pin("widget").sha == setup["head"]
    assert lock.package("torch").reason.startswith("not verified:")
    capsys.readouterr()
    assert _lock(setup, "--check") == 0
    assert "up to date" in capsys.readouterr().err


def test_check_fails_after_pin_bump(setup, capsys):
    assert _lock(setup, "--git-mirror", str(setup["mirror"])) == 0
    setup["write"](six="1.17.0", sha=setup["base"])
    capsys.readouterr()
    assert _lock(setup, "--check") == 1
    err = capsys.readouterr().err
    assert "package six: recipe pins 1.17.0, lock has 1.16.0" in err
    assert f"recipe pins {setup['base']}, lock has {setup['head']}" in err
    assert "recipe tiny changed since the lock was made" in err


def _hinted_command(err: str) -> list[str]:
    [line] = [ln for ln in err.splitlines() if ln.startswith("hint: regenerate it: ")]
    argv = shlex.split(line.removeprefix("hint: regenerate it: "))
    assert argv[0] == "envbuild", line
    return argv[1:]


def test_stale_lock_hint_is_a_command_that_works(setup, capsys, tmp_path, monkeypatch):
    """issue 49: the hint said `envbuild lock tiny --target lab`, an unknown recipe and target for
    a recipe and target given by path; it names them as given, with the lock's own place, and
    run as printed it makes the lock current."""
    assert _lock(setup) == 0
    setup["write"](six="1.17.0")
    monkeypatch.chdir(tmp_path)  # the recipe given by a relative path, as a user types it
    rel = ["lock", "tiny.yaml", "--target", LAB, "--lockdir", "locks", "--check"]
    capsys.readouterr()
    assert main(rel) == 1
    argv = _hinted_command(capsys.readouterr().err)
    assert argv == ["lock", "tiny.yaml", "--target", LAB, "--lockdir", "locks"]
    assert main(argv) == 0
    assert main(rel) == 0
    # a lock given by its file (-o here, --lock for plan and provision) is regenerated there
    other = tmp_path / "elsewhere" / "my.lock"
    assert main(["lock", "tiny.yaml", "--target", LAB, "-o", str(other)]) == 0
    setup["write"](six="1.16.0")
    capsys.readouterr()
    assert main(["lock", "tiny.yaml", "--target", LAB, "-o", str(other), "--check"]) == 1
    argv = _hinted_command(capsys.readouterr().err)
    assert argv == ["lock", "tiny.yaml", "--target", LAB, "-o", str(other)]
    assert main(argv) == 0 and main(["lock", "tiny.yaml", "--target", LAB, "-o", str(other), "--check"]) == 0


def test_check_json_and_unknown_schema(setup, capsys):
    assert _lock(setup) == 0  # no mirror: git pin recorded unverified
    assert read_lock(setup["lockfile"]).git_pin("widget").reason.startswith(
        "not verified: no mirror for https://github.com/acme/widget")
    capsys.readouterr()
    assert _lock(setup, "--check", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["results"][0]["problems"] == []
    text = setup["lockfile"].read_text().replace("schema: envbuild.lock/1", "schema: envbuild.lock/9")
    setup["lockfile"].write_text(text)
    assert _lock(setup, "--check") == 1
    assert "unknown lock schema 'envbuild.lock/9'" in capsys.readouterr().err


def test_check_missing_lock_and_missing_package(setup, capsys):
    assert _lock(setup, "--check") == 1
    assert "no lockfile at" in capsys.readouterr().err
    assert _lock(setup) == 0
    text = setup["lockfile"].read_text()
    start = text.index("  - name: six")
    end = text.index("  - name: ", start + 5)
    setup["lockfile"].write_text(text[:start] + text[end:])
    capsys.readouterr()
    assert _lock(setup, "--check") == 1
    assert "package six is in the recipe but missing from the lock" in capsys.readouterr().err


def test_sha_mismatch_against_mirror_is_an_error_naming_both(setup, capsys):
    setup["write"](sha=setup["off"])
    assert _lock(setup, "--git-mirror", str(setup["mirror"])) == 1
    err = capsys.readouterr().err
    assert setup["off"] in err and setup["head"] in err
    assert not setup["lockfile"].exists()  # nothing half-written


def test_bad_input(setup, capsys):
    assert main(["lock", "no-such-recipe", "--target", LAB]) == 2
    assert "unknown recipe 'no-such-recipe'" in capsys.readouterr().err
    assert main(["lock", str(setup["recipe"]), "--target", "no-such-target"]) == 2
    assert "unknown target" in capsys.readouterr().err
    assert main(["lock", str(setup["recipe"]), "--target", str(DATA / "other.yaml")]) == 2
    err = capsys.readouterr().err
    assert "not made for target 'other'" in err and "hint: its targets are: lab" in err
    assert main(["lock", str(setup["recipe"])]) == 2
    assert "missing --target" in capsys.readouterr().err
    assert _lock(setup, "--git-mirror", str(setup["lockdir"] / "absent")) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_an_installed_envbuild_locks_under_envbuild_home(setup, tmp_path, monkeypatch, capsys):
    """With no --lockdir, an installed envbuild writes the lock under $ENVBUILD_HOME/locks (not
    into site-packages, nor the working folder), prints its path, and provision finds it there."""
    from envbuild.lock import location

    package = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "envbuild"
    (package / "lockfiles").mkdir(parents=True)
    monkeypatch.setattr(location, "PACKAGE", package)
    monkeypatch.setattr(location, "SHIPPED_LOCKDIR", package / "lockfiles")
    monkeypatch.setattr(location, "INSTALLED", True)
    monkeypatch.delenv("ENVBUILD_LOCKDIR", raising=False)
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    args = ["lock", str(setup["recipe"]), "--target", LAB]
    assert main(args) == 0
    written = tmp_path / "home" / "locks" / "tiny" / "lab.lock"
    assert capsys.readouterr().out.strip() == str(written) and written.is_file()
    assert location.locate_lock("tiny", "lab") == written
    assert list(elsewhere.iterdir()) == [] and list(package.rglob("*")) == [package / "lockfiles"]
    assert main([*args, "--check"]) == 0
