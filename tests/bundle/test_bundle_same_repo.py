"""Two sources of one repository at two commits travel in one bundle, and an offline node
checks each out at its own commit.

megatron-deepspeed-slurm-h100's shape: source ``code`` and source ``vocab`` both from
``https://github.com/acme/proj``, ``code`` at its first commit, ``vocab`` at its second (the
GPU node refused such a bundle: check_plan and the node's clone looked the repository up by
URL, one commit per URL). A git mirror made here; real ``envbuild lock``, ``envbuild bundle``
and ``envbuild provision --bundle`` onto a chroot node in a network namespace without a
default route. A bundle that lacks one of the two commits is refused naming that source's
commit and what the bundle carries instead.
"""

from __future__ import annotations

import hashlib
import io
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

PREFIX = "/opt/envs/samerepo"
URL = "https://github.com/acme/proj"


def _git(*args: str, cwd: Path) -> str:
    date = "2024-01-10T10:00:00Z"
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _envbuild(*argv: str, home: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild", *argv], capture_output=True, text=True,
                          env={**os.environ, "ENVBUILD_HOME": str(home)}, timeout=timeout)


@pytest.fixture(scope="module")
def made(module_tmp, remove_tree):
    """The mirror (acme/proj with two commits), the recipe, its lock and its bundle."""
    base = module_tmp("samerepo")
    work = base / "work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    shas = []
    for n in (1, 2):
        (work / "which.txt").write_text(f"commit {n}\n")
        if n == 2:
            (work / "vocab.json").write_text('{"hello": 0}\n')  # only the later commit has it
        _git("add", "-A", cwd=work)
        _git("commit", "-qm", f"commit {n}", cwd=work)
        shas.append(_git("rev-parse", "HEAD", cwd=work))
    _git("clone", "-q", "--bare", str(work), str(base / "mirror" / "acme" / "proj.git"), cwd=base)
    recipe = base / "same-repo.yaml"
    recipe.write_text(yaml.safe_dump({
        "schema": 1, "name": "same-repo", "title": "Two sources of one repository",
        "description": "megatron-deepspeed-slurm-h100's shape: the code and a vocabulary from two commits",
        "python": "3.11", "targets": ["local"], "published": {"url": "https://example.invalid/proj"},
        "resolve_as_of": "2024-02-01", "environment": {"kind": "venv"},
        "sources": [{"name": "code", "url": URL, "ref": "main", "sha": shas[0], "install": "none",
                     "why": "the code at its older commit"},
                    {"name": "vocab", "url": URL, "ref": "main", "sha": shas[1], "install": "none",
                     "why": "a file only the later commit has"}]}, sort_keys=False))
    home, lock, out = base / "home", base / "same-repo.lock", base / "same-repo.tar"
    p = _envbuild("lock", str(recipe), "--target", "local", "--git-mirror", str(base / "mirror"), "-o", str(lock),
                  home=home)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    p = _envbuild("bundle", str(recipe), "--target", "local", "--lock", str(lock), "--git-mirror",
                  str(base / "mirror"), "--prefix", PREFIX, "-o", str(out), "--json", home=home)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    yield {"base": base, "home": home, "bundle": out, "shas": shas}
    remove_tree(base)


def _manifest(path: Path) -> Manifest:
    with tarfile.open(path) as tar:
        return Manifest.model_validate_json(tar.extractfile(MANIFEST).read())


def test_the_manifest_names_each_sources_commit(made) -> None:
    git = {g.name: g for g in _manifest(made["bundle"]).git}
    assert {(n, g.url, g.sha) for n, g in git.items()} == {("code", URL, made["shas"][0]),
                                                          ("vocab", URL, made["shas"][1])}
    assert git["code"].path != git["vocab"].path  # a repository per commit


def test_check_plan_accepts_both_commits_and_each_clones_its_own(made, tmp_path) -> None:
    from envbuild.bundle.unpack import open_bundle
    from envbuild.plan.model import Plan

    b = open_bundle(made["bundle"], home=tmp_path)
    plan = Plan.model_validate_json((b.root / "plan.json").read_text())
    b.check_plan(plan)  # raised "lacks ... (it carries <the other commit>)" when looked up by URL
    staged = b.stage_params()
    git = {g.name: g for g in b.manifest.git}
    assert {staged.git_commits[f"{URL}@{git[n].sha}"] for n in git} == {git[n].path[len("node/"):] for n in git}


def _without(src: Path, dest: Path, name: str) -> Path:
    """The bundle with source ``name``'s repository and pin removed, its manifest consistent."""
    with tarfile.open(src) as tin:
        m = Manifest.model_validate_json(tin.extractfile(MANIFEST).read())
        gone = next(g for g in m.git if g.name == name).path + "/"
        kept = m.model_copy(update={"git": [g for g in m.git if g.name != name],
                                    "files": [f for f in m.files if not f.path.startswith(gone)]})
        with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tout:
            for member in tin.getmembers():
                if member.name.startswith(gone):
                    continue
                data = kept.to_json().encode() if member.name == MANIFEST else tin.extractfile(member).read()
                member.size = len(data)
                tout.addfile(member, io.BytesIO(data))
    return dest


def test_a_bundle_lacking_one_of_the_two_commits_is_refused_naming_it(made, tmp_path) -> None:
    from envbuild.bundle.unpack import open_bundle
    from envbuild.errors import CheckFailed
    from envbuild.plan.model import Plan

    lacking = open_bundle(_without(made["bundle"], tmp_path / "lacking.tar", "vocab"), home=tmp_path)
    plan = Plan.model_validate_json((lacking.root / "plan.json").read_text())
    with pytest.raises(CheckFailed) as err:
        lacking.check_plan(plan)
    text = str(err.value)
    assert f"step git:vocab: {URL} @ {made['shas'][1][:12]} (it carries {made['shas'][0][:12]} for code)" in text
    assert "git:code" not in text and "lacks 1 thing(s)" in text


@pytest.fixture(scope="module")
def node(module_tmp, remove_tree):
    why = chroot.why_unavailable()
    if why:
        pytest.skip(why)
    from envbuild.testbed.offline import OfflineCluster

    base = module_tmp("samerepo-node")
    cluster = OfflineCluster(base / "nodes", 1, tag=f"ebs{os.getpid() % 10000}", base=60)
    nodes = cluster.__enter__()
    try:
        yield {"cluster": cluster, "node": nodes[0]}
    finally:
        cluster.stop()
        remove_tree(base)


def test_provision_offline_checks_out_each_source_at_its_commit(made, node) -> None:
    n, c = node["node"], node["cluster"]
    assert n.ssh("python3 -c \"import socket; socket.create_connection(('pypi.org', 443), 5)\"",
                 check=False).returncode != 0  # no route out
    bundle = made["bundle"]
    p = _envbuild("provision", "--target", "local", "--bundle", str(bundle), "--hosts", c.hosts,
                  "--identity", str(c.key), "--known-hosts", str(c.known_hosts), "--prefix", PREFIX,
                  "--bundle-sha256", hashlib.sha256(bundle.read_bytes()).hexdigest(),
                  "--no-smoke", "--json", home=made["home"], timeout=1500)
    assert p.returncode == 5, p.stdout[-3000:] + p.stderr[-2000:]  # --no-smoke: ok, nothing judged (exit 5)
    for name, sha in (("code", made["shas"][0]), ("vocab", made["shas"][1])):
        assert n.ssh(f"git -C {PREFIX}/src/{name} rev-parse HEAD").stdout.strip() == sha
        assert n.ssh(f"git -C {PREFIX}/src/{name} remote get-url origin").stdout.strip() == URL
    assert n.ssh(f"cat {PREFIX}/src/vocab/which.txt").stdout.strip() == "commit 2"
    assert n.ssh(f"test -e {PREFIX}/src/code/vocab.json", check=False).returncode != 0
