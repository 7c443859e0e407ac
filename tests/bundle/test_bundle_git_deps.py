"""A bundle carries the git dependencies of source installs (ezpz's ambivalent and enrich:
``name @ git+URL`` in a source's own metadata, pinned by the lock under ``git`` with
``required_by``), and an offline node installs them from it.

A recipe made here in ezpz's shape: a source ``tool`` whose pyproject declares
``helper @ git+https://github.com/acme/helper`` (no ref), both in a git mirror the test makes.
``envbuild lock`` pins helper to the default branch as of the recipe's date; ``envbuild bundle``
packs both commits; ``envbuild provision --bundle`` onto a chroot node in a network namespace
without a default route builds and installs helper, then tool, from the bundle only. A bundle
that lacks helper (its files and pin removed, the manifest consistent) is refused naming it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from envbuild.bundle.manifest import MANIFEST, Manifest
from envbuild.testbed import chroot

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PREFIX = "/opt/envs/gitdeps"
HELPER_URL = "https://github.com/acme/helper"
SETUPTOOLS = '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'


def _git(*args: str, cwd: Path, date: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _envbuild(*argv: str, home: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild", *argv], capture_output=True, text=True,
                          env={**os.environ, "ENVBUILD_HOME": str(home)}, timeout=timeout)


def _repo(base: Path, name: str, commits: list[tuple[str, dict[str, str]]]) -> list[str]:
    """mirror/acme/<name>.git, one commit per (date, files); the SHAs."""
    work = base / "work" / name
    work.mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=work, date=commits[0][0])
    shas = []
    for date, files in commits:
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        _git("add", "-A", cwd=work, date=date)
        _git("commit", "-qm", f"{name} of {date}", cwd=work, date=date)
        shas.append(_git("rev-parse", "HEAD", cwd=work, date=date))
    _git("clone", "-q", "--bare", str(work), str(base / "mirror" / "acme" / f"{name}.git"), cwd=base, date=date)
    return shas


def _project(name: str, version: str, deps: list[str], code: str) -> dict[str, str]:
    return {"pyproject.toml": SETUPTOOLS + f'[project]\nname = "{name}"\nversion = "{version}"\n'
                                           f"dependencies = {json.dumps(deps)}\n",
            f"{name}/__init__.py": code}


@pytest.fixture(scope="module")
def made(module_tmp, remove_tree):
    """The mirror, the recipe, its lock and its bundle."""
    base = module_tmp("gitdeps")
    # helper: one commit before the recipe's date (the pin), one after it (not taken)
    helper = _repo(base, "helper", [
        ("2024-01-10T10:00:00Z", _project("helper", "0.1", [], 'VALUE = "helper 0.1"\n')),
        ("2024-03-01T10:00:00Z", _project("helper", "0.2", [], 'VALUE = "helper 0.2"\n'))])
    tool = _repo(base, "tool", [("2024-01-20T10:00:00Z", _project(
        "tool", "0.1", [f"helper @ git+{HELPER_URL}"], "from helper import VALUE\n"))])
    recipe = base / "tool-gitdeps.yaml"
    recipe.write_text(yaml.safe_dump({
        "schema": 1, "name": "tool-gitdeps", "title": "A source with a git dependency",
        "description": "ezpz's shape: a source install whose metadata names a git dependency",
        "python": "3.11", "targets": ["local"], "published": {"url": "https://example.invalid/tool"},
        "resolve_as_of": "2024-02-01", "environment": {"kind": "venv"},
        "sources": [{"name": "tool", "url": "https://github.com/acme/tool", "ref": "main", "sha": tool[0],
                     "install": "wheel", "why": "a source whose pyproject names a git dependency"}],
        "import_check": ["tool", "helper"]}, sort_keys=False))
    home, lock, out = base / "home", base / "tool-gitdeps.lock", base / "gitdeps.tar"
    p = _envbuild("lock", str(recipe), "--target", "local", "--git-mirror", str(base / "mirror"), "-o", str(lock),
                  home=home)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    p = _envbuild("bundle", str(recipe), "--target", "local", "--lock", str(lock), "--git-mirror",
                  str(base / "mirror"), "--prefix", PREFIX, "-o", str(out), "--json", home=home)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    yield {"base": base, "recipe": recipe, "lock": lock, "bundle": out, "home": home,
           "helper": helper, "tool": tool[0]}
    remove_tree(base)


def _manifest(path: Path) -> Manifest:
    with tarfile.open(path) as tar:
        return Manifest.model_validate_json(tar.extractfile(MANIFEST).read())


def test_lock_pins_the_git_dependency_and_the_bundle_carries_it(made) -> None:
    from envbuild.lock import read_lock

    lock = read_lock(made["lock"])
    pin = lock.git_pin("helper")
    assert (pin.url, pin.sha, pin.required_by, pin.verified) == (HELPER_URL, made["helper"][0], ["tool"], True)
    m = _manifest(made["bundle"])
    git = {g.name: g for g in m.git}
    assert git["helper"].sha == pin.sha and git["helper"].required_by == ["tool"]
    assert git["tool"].sha == made["tool"] and git["tool"].required_by is None
    files = [f for f in m.files if f.path.startswith(git["helper"].path + "/")]
    assert files and all(f.kind == "git" and f.name == "helper" and len(f.sha256) == 64 for f in files)
    # the packed repository holds the pinned commit (not the later one), its HEAD on it
    with tarfile.open(made["bundle"]) as tar:
        tar.extractall(made["base"] / "unpacked", filter="data")
    repo = made["base"] / "unpacked" / git["helper"].path
    assert _git("rev-parse", "HEAD", cwd=repo, date="2024-01-01T00:00:00Z") == made["helper"][0]
    assert "refs/heads/HEAD" not in _git("show-ref", cwd=repo, date="2024-01-01T00:00:00Z")


def test_a_lock_without_the_dependencys_commit_is_not_packed(made, tmp_path) -> None:
    """A git dependency the lock could not pin (no commit) would leave tool's install without
    it: the bundle refuses, naming it and whose dependency it is."""
    from envbuild.lock import read_lock

    pin = read_lock(made["lock"]).git_pin("helper")
    text, entry = made["lock"].read_text(), f"    sha: {pin.sha}\n    verified: true\n"
    assert text.count(entry) == 1  # the git pin (declared[] names the sha without verified)
    lock = tmp_path / "unpinned.lock"
    lock.write_text(text.replace(entry, "    verified: false\n    reason: no commit as of the date\n"))
    p = _envbuild("bundle", str(made["recipe"]), "--target", "local", "--lock", str(lock), "--git-mirror",
                  str(made["base"] / "mirror"), "--prefix", PREFIX, "-o", str(tmp_path / "u.tar"), home=made["home"])
    assert p.returncode == 1, p.stdout[-1500:] + p.stderr[-1500:]
    assert "helper (git dependency of tool)" in p.stderr and not (tmp_path / "u.tar").exists()


def _without_helper(src: Path, dest: Path) -> Path:
    """The bundle with helper's repository and pin removed, its manifest consistent."""
    with tarfile.open(src) as tin:
        m = Manifest.model_validate_json(tin.extractfile(MANIFEST).read())
        gone = next(g for g in m.git if g.name == "helper").path + "/"
        kept = m.model_copy(update={"git": [g for g in m.git if g.name != "helper"],
                                    "files": [f for f in m.files if not f.path.startswith(gone)]})
        with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tout:
            for member in tin.getmembers():
                if member.name.startswith(gone):
                    continue
                data = kept.to_json().encode() if member.name == MANIFEST else tin.extractfile(member).read()
                member.size = len(data)
                tout.addfile(member, io.BytesIO(data))
    return dest


def test_a_bundle_without_the_git_dependency_is_refused_naming_it(made, tmp_path) -> None:
    from envbuild.bundle.unpack import open_bundle
    from envbuild.errors import CheckFailed
    from envbuild.plan.model import Plan

    lacking = open_bundle(_without_helper(made["bundle"], tmp_path / "lacking.tar"), home=tmp_path)
    plan = Plan.model_validate_json((lacking.root / "plan.json").read_text())
    with pytest.raises(CheckFailed) as err:
        lacking.check_plan(plan)
    assert f"{HELPER_URL} @ {made['helper'][0][:12]} (git dependency helper of tool: not in the bundle)" \
        in str(err.value)


@pytest.fixture(scope="module")
def node(made, module_tmp, remove_tree):
    why = chroot.why_unavailable()
    if why:
        pytest.skip(why)
    from envbuild.testbed.offline import OfflineCluster

    base = module_tmp("gitdeps-node")
    cluster = OfflineCluster(base / "nodes", 1, tag=f"ebg{os.getpid() % 10000}", base=50)
    nodes = cluster.__enter__()
    try:
        yield {"cluster": cluster, "node": nodes[0]}
    finally:
        cluster.stop()
        remove_tree(base)


def _provision(made, node, bundle: Path, prefix: str = PREFIX) -> subprocess.CompletedProcess:
    c = node["cluster"]
    # a bundle of the test's own recipe and lock (no lock envbuild holds): pinned by its sha256
    return _envbuild("provision", "--target", "local", "--bundle", str(bundle), "--hosts", c.hosts,
                     "--identity", str(c.key), "--known-hosts", str(c.known_hosts), "--prefix", prefix,
                     "--bundle-sha256", hashlib.sha256(bundle.read_bytes()).hexdigest(),
                     "--no-smoke", "--json", home=made["home"], timeout=1500)


def test_provision_offline_installs_the_git_dependency_from_the_bundle(made, node) -> None:
    n = node["node"]
    assert n.ssh("python3 -c \"import socket; socket.create_connection(('pypi.org', 443), 5)\"",
                 check=False).returncode != 0  # no route out
    p = _provision(made, node, made["bundle"])
    # --no-smoke: every node ok, nothing judged (NOT JUDGED, exit 5)
    assert p.returncode == 5, p.stdout[-3000:] + p.stderr[-2000:]
    assert n.ssh(f"git -C {PREFIX}/src/helper rev-parse HEAD").stdout.strip() == made["helper"][0]
    got = n.ssh(f"{PREFIX}/bin/python -c 'import tool, helper; print(tool.VALUE, helper.__file__)'").stdout.split()
    assert got[:2] == ["helper", "0.1"] and "site-packages" in got[2]  # the pinned commit's, installed


def test_provision_refuses_the_bundle_without_it_before_installing(made, node, tmp_path) -> None:
    prefix = "/opt/envs/gitdeps-lacking"
    p = _provision(made, node, _without_helper(made["bundle"], tmp_path / "lacking.tar"), prefix=prefix)
    assert p.returncode == 1, p.stdout[-1500:] + p.stderr[-1500:]
    assert "git dependency helper of tool" in p.stderr
    assert node["node"].ssh(f"test -e {prefix}", check=False).returncode != 0
