"""A bundle carries what the plan needs beyond wheels: the recipe's data files with their
sha256, the git submodules the build options read, and what every node's plan needs.

A recipe made here: torch (CPU, /opt/wheels), the Apex stand-in (tests/data/apex_standin)
built with ``--fast_multihead_attn``, whose setup.py needs the cutlass submodule checked out
(as Apex's does), and one data file into the Apex tree, served by a loopback HTTP server while
packing. The git mirror (NVIDIA/apex.git with a cutlass submodule whose .gitmodules names the
real, unreachable URL; NVIDIA/cutlass.git) is made by the test. The bundle is provisioned onto
a chroot node in a network namespace without a default route (the server is stopped by then):
the data file and the submodule come from the bundle only. A data file whose bytes differ from
the recipe's sha256 is refused while packing; a bundle whose data file was changed afterwards
is refused before anything is installed.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
import yaml

from envbuild.bundle.manifest import MANIFEST, Manifest
from envbuild.testbed import chroot
from support.paths import DATA

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STANDIN = DATA / "apex_standin"
WHEELS = Path("/opt/wheels")
CUTLASS = "apex/contrib/csrc/multihead_attn/cutlass"
CUTLASS_URL = "https://github.com/NVIDIA/cutlass.git"
APEX_DATE = "2021-02-23T12:00:00Z"
VOCAB = b'{"<|endoftext|>": 50256, "hello": 31373}\n'
PREFIX = "/opt/envs/contents"


def _git(*args: str, cwd: Path, date: str | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _envbuild(*argv: str, home: Path, timeout: int = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envbuild", *argv], capture_output=True, text=True,
                          env={**os.environ, "ENVBUILD_HOME": str(home)}, timeout=timeout)


class _Server:
    """A loopback HTTP server over ``folder`` (the data file's URL while packing)."""

    def __init__(self, folder: Path):
        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(folder), **kw)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _mirror(base: Path) -> dict:
    """mirror/NVIDIA/apex.git (the stand-in with the cutlass submodule) and mirror/NVIDIA/cutlass.git."""
    cut = base / "cutlass-work"
    cut.mkdir()
    _git("init", "-q", "-b", "main", cwd=cut)
    (cut / "cutlass.h").write_text("// cutlass stand-in\n")
    _git("add", ".", cwd=cut)
    _git("commit", "-qm", "cutlass", cwd=cut, date=APEX_DATE)
    root = base / "mirror" / "NVIDIA"
    root.mkdir(parents=True)
    _git("clone", "-q", "--bare", str(cut), str(root / "cutlass.git"), cwd=base)
    work = base / "apex-work"
    shutil.copytree(STANDIN, work)
    _git("init", "-q", "-b", "master", cwd=work)
    _git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(cut), CUTLASS, cwd=work)
    _git("config", "-f", ".gitmodules", f"submodule.{CUTLASS}.url", CUTLASS_URL, cwd=work)
    _git("add", ".", cwd=work)
    _git("commit", "-qm", "apex stand-in with the cutlass submodule", cwd=work, date=APEX_DATE)
    _git("clone", "-q", "--bare", str(work), str(root / "apex.git"), cwd=base)
    return {"dir": base / "mirror", "sha": _git("rev-parse", "HEAD", cwd=work),
            "cut_sha": _git("rev-parse", "HEAD", cwd=cut)}


def _recipe(sha: str, url: str, vocab_sha: str) -> str:
    return yaml.safe_dump({
        "schema": 1, "name": "apex-standin-data", "title": "Apex stand-in with a data file",
        "description": "torch CPU, an Apex-shaped tree built with --fast_multihead_attn, one download",
        "python": "3.11", "targets": ["local"], "published": {"url": "https://example.invalid/apex-standin"},
        "environment": {"kind": "venv"},
        "packages": [{"name": "torch", "version": "2.13.0", "cuda": "cpu", "why": "torch"}],
        "sources": [{"name": "apex", "url": "https://github.com/NVIDIA/apex", "ref": "master", "sha": sha,
                     "install": "apex", "build_options": ["--fast_multihead_attn"],
                     "why": "Apex stand-in (tests/data/apex_standin)"}],
        "data": [{"name": "vocab", "url": f"{url}/vocab.json", "component": "apex", "path": "data/vocab.json",
                  "sha256": vocab_sha, "why": "a vocabulary the tree reads"}],
        "import_check": ["torch", "apex"],
    }, sort_keys=False)


@pytest.fixture(scope="module")
def made(module_tmp, remove_tree):
    """The mirror, the recipe, its lock and its bundle (the data server stopped afterwards)."""
    if not any(WHEELS.glob("torch-2.13.0*cp311*.whl")):
        pytest.skip(f"no torch 2.13.0 cp311 wheel in {WHEELS}")
    base = module_tmp("contents")
    mirror = _mirror(base)
    www = base / "www"
    www.mkdir()
    (www / "vocab.json").write_bytes(VOCAB)
    server = _Server(www)
    home = base / "home"
    try:
        recipe = base / "apex-standin-data.yaml"
        recipe.write_text(_recipe(mirror["sha"], server.url, hashlib.sha256(VOCAB).hexdigest()))
        lock = base / "apex-standin-data.lock"
        p = _envbuild("lock", str(recipe), "--target", "local", "--git-mirror", str(mirror["dir"]),
                      "--wheelhouse", str(WHEELS), "-o", str(lock), home=home, timeout=900)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        out = base / "contents.tar"
        p = _envbuild("bundle", str(recipe), "--target", "local", "--lock", str(lock), "--git-mirror",
                      str(mirror["dir"]), "--wheelhouse", str(WHEELS), "--prefix", PREFIX, "-o", str(out),
                      "--json", home=home, timeout=900)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        # the server now serves other bytes than the recipe's digest: packing refuses
        (www / "vocab.json").write_bytes(VOCAB.replace(b"hello", b"hellO"))
        bad = _envbuild("bundle", str(recipe), "--target", "local", "--lock", str(lock), "--git-mirror",
                        str(mirror["dir"]), "--wheelhouse", str(WHEELS), "--prefix", PREFIX,
                        "-o", str(base / "bad.tar"), home=home, timeout=900)
    finally:
        server.stop()
    yield {"base": base, "mirror": mirror, "recipe": recipe, "lock": lock, "bundle": out,
           "summary": json.loads(p.stdout), "bad": bad, "home": home}
    remove_tree(base)  # ~0.4 GB (torch twice): not kept for later runs


def _manifest(path: Path) -> Manifest:
    with tarfile.open(path) as tar:
        return Manifest.model_validate_json(tar.extractfile(MANIFEST).read())


def test_bundle_carries_the_data_file_and_the_submodule(made) -> None:
    m = _manifest(made["bundle"])
    data = [f for f in m.files if f.kind == "data"]
    assert [(f.path, f.name, f.sha256) for f in data] == [("node/data/vocab.json", "vocab",
                                                           hashlib.sha256(VOCAB).hexdigest())]
    pins = {g.name: g for g in m.git}
    assert pins["apex"].sha == made["mirror"]["sha"]
    sub = pins[f"apex:{CUTLASS}"]
    assert sub.url == CUTLASS_URL and sub.sha == made["mirror"]["cut_sha"]  # the commit the tree records
    assert any(f.path.startswith(sub.path + "/") for f in m.files)
    with tarfile.open(made["bundle"]) as tar:
        assert tar.extractfile("node/data/vocab.json").read() == VOCAB


def test_a_data_file_other_than_the_recipes_digest_is_not_packed(made) -> None:
    bad = made["bad"]
    assert bad.returncode == 1, bad.stdout[-1500:] + bad.stderr[-1500:]
    assert "data vocab" in bad.stderr and "the recipe says" in bad.stderr
    assert not (made["base"] / "bad.tar").exists()


def test_every_node_of_the_facts_is_planned(made, tmp_path) -> None:
    """A facts file of two nodes: both plans are in the bundle (plans/), the content their union."""
    from envbuild.facts.gather import gather_local
    from envbuild.facts.load import dump_facts

    one = gather_local()
    facts = [one.model_copy(update={"host": h}) for h in ("node-a", "node-b")]
    (tmp_path / "facts.json").write_text(dump_facts(facts, as_list=True))
    data_mirror = tmp_path / "data-mirror"  # the server is gone: the data file from a mirror folder
    data_mirror.mkdir()
    (data_mirror / "vocab.json").write_bytes(VOCAB)
    out = tmp_path / "two.tar"
    p = _envbuild("bundle", str(made["recipe"]), "--target", "local", "--lock", str(made["lock"]),
                  "--facts", str(tmp_path / "facts.json"), "--git-mirror", str(made["mirror"]["dir"]),
                  "--wheelhouse", str(WHEELS), "--data-mirror", str(data_mirror),
                  "--prefix", PREFIX, "-o", str(out), "--json", home=made["home"], timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert res["nodes"] == ["node-a", "node-b"]
    m = _manifest(out)
    plans = sorted(f.path for f in m.files if f.path.startswith("plans/"))
    assert plans == ["plans/00-node-a.json", "plans/01-node-b.json"]
    assert res["origins"]["vocab.json"].startswith("the data mirror")


def test_union_of_node_plans_and_what_a_plan_lacks(made, tmp_path) -> None:
    """make_bundle of two plans that differ (the second installs one more package): the bundle
    holds both packages; a plan whose submodule or data file the bundle lacks is refused."""
    from envbuild.bundle.pack import planned_requirements
    from envbuild.bundle.unpack import open_bundle
    from envbuild.errors import CheckFailed
    from envbuild.plan.model import Plan

    opened = open_bundle(made["bundle"], home=tmp_path)
    plan = Plan.model_validate_json((opened.root / "plan.json").read_text())
    opened.check_plan(plan)
    step = plan.pip_installs()[0]
    extra = step.params.requirements[0].model_copy(update={"name": "six", "version": "1.16.0"})
    params = step.params.model_copy(update={"requirements": [*step.params.requirements, extra]})
    other = plan.model_copy(update={"steps": [s if s is not step else s.model_copy(update={"params": params})
                                              for s in plan.steps]})
    union = planned_requirements([plan, other])
    assert ("six", "1.16.0") in union and len(union) == len(planned_requirements(plan)) + 1
    git = plan.sources()[0]
    data = plan.downloads()[0]
    lacking = plan.model_copy(update={"steps": [
        git.model_copy(update={"params": git.params.model_copy(update={"submodules": [CUTLASS, "third_party/x"]})})
        if s is git else
        data.model_copy(update={"params": data.params.model_copy(update={
            "files": [*data.params.files, data.params.files[0].model_copy(update={"name": "merges"})]})})
        if s is data else s for s in plan.steps]})
    with pytest.raises(CheckFailed) as err:
        opened.check_plan(lacking)
    assert "submodule third_party/x of apex" in str(err.value) and "data file merges" in str(err.value)


@pytest.fixture(scope="module")
def node(made, module_tmp, remove_tree):
    why = chroot.why_unavailable()
    if why:
        pytest.skip(why)
    from envbuild.testbed.offline import OfflineCluster

    base = module_tmp("contents-node")
    cluster = OfflineCluster(base / "nodes", 1, tag=f"ebc{os.getpid() % 10000}", base=40)
    nodes = cluster.__enter__()
    try:
        yield {"cluster": cluster, "node": nodes[0]}
    finally:
        cluster.stop()
        remove_tree(base)  # the node's overlay (~1 GB)


def _provision(made, node, bundle: Path, prefix: str = PREFIX) -> subprocess.CompletedProcess:
    c = node["cluster"]
    # a bundle of the test's own recipe and lock (no lock envbuild holds): pinned by its sha256
    return _envbuild("provision", "--target", "local", "--bundle", str(bundle), "--hosts", c.hosts,
                     "--identity", str(c.key), "--known-hosts", str(c.known_hosts), "--prefix", prefix,
                     "--bundle-sha256", hashlib.sha256(bundle.read_bytes()).hexdigest(),
                     "--no-smoke", "--json", home=made["home"])


def test_provision_offline_takes_the_data_file_and_submodule_from_the_bundle(made, node) -> None:
    n = node["node"]
    assert n.ssh("python3 -c \"import socket; socket.create_connection(('pypi.org', 443), 5)\"",
                 check=False).returncode != 0  # no route out
    p = _provision(made, node, made["bundle"])
    # --no-smoke: every node ok, nothing judged (NOT JUDGED, exit 5)
    assert p.returncode == 5, p.stdout[-3000:] + p.stderr[-2000:]
    assert n.ssh(f"cat {PREFIX}/src/apex/data/vocab.json").stdout.encode() == VOCAB
    assert n.ssh(f"cat {PREFIX}/.envbuild/data/vocab.sha256").stdout.split()[0] == hashlib.sha256(VOCAB).hexdigest()
    head = n.ssh(f"git -C {PREFIX}/src/apex/{CUTLASS} rev-parse HEAD").stdout.strip()
    assert head == made["mirror"]["cut_sha"]
    assert n.ssh(f"{PREFIX}/bin/python -c 'import apex; print(apex.__file__)'").stdout.strip().startswith(PREFIX)


def test_a_changed_data_file_is_refused_before_anything_is_installed(made, node, tmp_path) -> None:
    bad = tmp_path / "tampered.tar"
    with tarfile.open(made["bundle"]) as tin, tarfile.open(bad, "w", format=tarfile.PAX_FORMAT) as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read() if m.isfile() else None
            if m.name == "node/data/vocab.json":
                data = data.replace(b"hello", b"hellO")
            tout.addfile(m, None if data is None else io.BytesIO(data))
    prefix = "/opt/envs/tampered-data"
    p = _provision(made, node, bad, prefix=prefix)
    assert p.returncode == 2, p.stdout[-1500:] + p.stderr[-1500:]
    assert "node/data/vocab.json: sha256" in p.stderr and "nothing was installed" in p.stderr
    assert node["node"].ssh(f"test -e {prefix}", check=False).returncode != 0
