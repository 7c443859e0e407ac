"""A bundle says whether its node needs the network: "offline: yes/no" in the manifest and in
``envbuild bundle``'s output (--json too), naming each thing still fetched; ``--offline`` refuses
(exit 1, nothing written) when something is (issue 53, item 6).

MegatronApp's pod (rtx4090-pod) is the case that was reported: its bundle exited 0 while its node
still pulls the NGC image it runs in and installs apt packages. Its plans are read here from the
shipped recipe, lock and profile; the bundle itself needs a git mirror holding the pinned
MegatronApp commit, so that part runs where ``ENVBUILD_GIT_MIRROR`` holds one and skips, saying
so, elsewhere (CI has no GitHub). An h100-venv bundle made with a wheelhouse and a git mirror
(both made here) is offline. The base image of a container recipe carried with ``--image-tar``,
and loaded on the node: tests/bundle/test_bundle_image_tar.py.
"""

from __future__ import annotations

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
from support.paths import ROOT

NGC = "nvcr.io/nvidia/pytorch:23.04-py3"
POD_APT = "libmpfr-dev libgmp3-dev libmpc-dev libevent-dev strace perftest"


def _envbuild(*argv: str, home: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ENVBUILD_GIT_MIRROR"}
    return subprocess.run([sys.executable, "-m", "envbuild", *argv], capture_output=True, text=True,
                          env={**env, "ENVBUILD_HOME": str(home)}, timeout=timeout, cwd=ROOT)


def _manifest(path: Path) -> Manifest:
    with tarfile.open(path) as tar:
        return Manifest.model_validate_json(tar.extractfile(MANIFEST).read())


def _pod_plans():
    from envbuild.bundle.pack import node_plans
    from envbuild.inputs import find_lock, node_facts
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    rec, tgt = load_recipe("megatronapp"), load_target("rtx4090-pod")
    return node_plans(rec, tgt, node_facts(tgt, None), find_lock(rec, tgt, None), None)


def test_the_pods_plan_needs_its_base_image_and_apt_packages() -> None:
    from envbuild.bundle.network import needs

    got = {(n.kind, n.what): n for n in needs(_pod_plans())}
    assert set(got) == {("apt", POD_APT), ("base-image", NGC)}, sorted(got)
    assert got[("base-image", NGC)].step == "rtx4090-pod: environment" and "--image-tar" in got[("base-image", NGC)].fix
    assert got[("apt", POD_APT)].step == "rtx4090-pod: system-packages"
    # carried, the image is no longer needed; apt still is
    assert [n.kind for n in needs(_pod_plans(), [NGC])] == ["apt"]


@pytest.mark.integration
def test_offline_refuses_the_pods_bundle_naming_what_it_needs_and_writes_nothing(tmp_path) -> None:
    out = tmp_path / "app.tar"
    p = _envbuild("bundle", "megatronapp", "--target", "rtx4090-pod", "-o", str(out), "--offline", home=tmp_path / "h")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    said = " ".join(p.stderr.split())
    assert "--offline: a node provisioned from the bundle of megatronapp on rtx4090-pod would still need the " \
           "network for 2 thing(s)" in said
    assert f"base-image {NGC} (rtx4090-pod: environment)" in said and f"apt {POD_APT}" in said
    assert "nothing was written" in said and "Traceback" not in p.stderr
    assert not out.exists() and list(tmp_path.glob("app.tar*")) == []  # no partial file either


@pytest.mark.integration
def test_the_pods_bundle_says_offline_no_naming_them(tmp_path) -> None:
    from envbuild.gitsrc import mirror_path
    from envbuild.recipes import load_recipe

    mirror = os.environ.get("ENVBUILD_GIT_MIRROR")
    url = load_recipe("megatronapp").source("megatronapp").url
    if not mirror or mirror_path(url, Path(mirror)) is None:
        pytest.skip(f"the bundle packs MegatronApp's pinned commit: set ENVBUILD_GIT_MIRROR to a folder holding {url}")
    out = tmp_path / "app.tar"
    p = _envbuild("bundle", "megatronapp", "--target", "rtx4090-pod", "--git-mirror", mirror, "-o", str(out),
                  "--json", home=tmp_path / "h")
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert res["offline"] is False
    assert [(n["kind"], n["what"]) for n in res["needs_network"]] == [("apt", POD_APT), ("base-image", NGC)]
    m = _manifest(out)
    assert m.offline is False and [n.model_dump() for n in m.needs_network] == res["needs_network"]
    text = _envbuild("bundle", "megatronapp", "--target", "rtx4090-pod", "--git-mirror", mirror, "-o", str(out),
                     home=tmp_path / "h")
    assert "offline: no: the node still needs the network for 2 thing(s):" in text.stdout
    assert f"  - base-image {NGC} (rtx4090-pod: environment)" in text.stdout


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_AUTHOR_DATE="2024-01-10T10:00:00Z",
               GIT_COMMITTER_DATE="2024-01-10T10:00:00Z")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.integration
def test_an_h100_venv_bundle_with_a_wheelhouse_and_a_mirror_is_offline(tmp_path) -> None:
    """Over the node's own torch (preinstalled), a wheel from a wheelhouse, one from PyPI, a source
    from the git mirror: nothing left to fetch."""
    from test_bundle_hints import wheel

    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "README").write_text("a tree\n")
    _git("add", ".", cwd=work)
    _git("commit", "-qm", "one", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "mirror" / "acme" / "proj.git"), cwd=tmp_path)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "acmetool", "1.0", "py3-none-any")
    recipe = tmp_path / "tiny-h100.yaml"
    recipe.write_text(yaml.safe_dump({
        "schema": 1, "name": "tiny-h100", "title": "A venv over the H100 node's own torch",
        "description": "a wheelhouse wheel, a PyPI wheel and a source", "python": "3.12",
        "targets": ["h100-venv"], "published": {"url": "https://example.invalid/tiny-h100"},
        "environment": {"kind": "venv", "system_site_packages": True},
        "packages": [{"name": "torch", "version": "2.11.0", "preinstalled": True, "why": "the node's own"},
                     {"name": "acmetool", "version": "1.0", "why": "from the wheelhouse"},
                     {"name": "six", "version": "1.17.0", "why": "from PyPI"}],
        "sources": [{"name": "proj", "url": "https://github.com/acme/proj", "ref": "main",
                     "sha": _git("rev-parse", "HEAD", cwd=work), "install": "none", "why": "a tree"}],
        "import_check": ["six"]}, sort_keys=False))
    home, lock, out = tmp_path / "home", tmp_path / "tiny.lock", tmp_path / "tiny.tar"
    made = ["--git-mirror", str(tmp_path / "mirror"), "--wheelhouse", str(wheels)]
    p = _envbuild("lock", str(recipe), "--target", "h100-venv", *made, "-o", str(lock), home=home)
    assert p.returncode == 0, p.stderr[-3000:]
    p = _envbuild("bundle", str(recipe), "--target", "h100-venv", "--lock", str(lock), *made, "-o", str(out),
                  "--offline", "--json", home=home)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert res["offline"] is True and res["needs_network"] == [] and res["kinds"]["git"]["files"] > 0
    m = _manifest(out)
    assert m.offline is True and m.needs_network == [] and {d.name for d in m.dists()} >= {"acmetool", "six"}
    assert [o.name for o in m.omitted] == ["torch"]
    p = _envbuild("bundle", str(recipe), "--target", "h100-venv", "--lock", str(lock), *made, "-o", str(out), home=home)
    assert "offline: yes: the node needs nothing beyond the bundle" in p.stdout


def test_a_bundle_made_before_says_its_needs_as_text_and_reads_as_such() -> None:
    """Bundles made before the needs were typed listed apt as text, and had no offline field."""
    old = {"recipe": "r", "target": "t", "lock_digest": "x", "envbuild_version": "0.1.0", "python": "3.11",
           "needs_network": ["system packages: strace"]}
    m = Manifest.model_validate(old)
    assert m.offline is None and not m.is_offline and m.needs_network[0].kind == "apt"
    assert Manifest.model_validate({**old, "needs_network": []}).is_offline
    with pytest.raises(ValueError, match="offline is True but needs_network lists 1"):
        Manifest.model_validate({**old, "offline": True})


# --- the saved image's own index (no engine needed) -----------------------------------------

def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_docker_archive_and_an_oci_archive_name_their_image_and_its_id(tmp_path) -> None:
    from envbuild.bundle.imagetar import find

    ident, blob = "a" * 64, "b" * 64
    docker = _tar(tmp_path / "d.tar", {"manifest.json": json.dumps(
        [{"Config": f"{ident}.json", "RepoTags": ["ubuntu:22.04"], "Layers": []}]).encode()})
    assert find(docker, "docker.io/library/ubuntu:22.04").id == ident
    oci = _tar(tmp_path / "o.tar", {
        "index.json": json.dumps({"manifests": [{"digest": f"sha256:{blob}", "annotations": {
            "org.opencontainers.image.ref.name": "localhost/base:1"}}]}).encode(),
        f"blobs/sha256/{blob}": json.dumps({"config": {"digest": f"sha256:{ident}"}}).encode()})
    assert find(oci, "localhost/base:1").id == ident


def test_an_archive_without_the_plans_base_image_is_refused_naming_what_it_holds(tmp_path) -> None:
    from envbuild.bundle.imagetar import find
    from envbuild.errors import InputError

    docker = _tar(tmp_path / "d.tar", {"manifest.json": json.dumps(
        [{"Config": "c" * 64 + ".json", "RepoTags": ["localhost/other:1"]}]).encode()})
    with pytest.raises(InputError, match=f"holds localhost/other:1, not the base image {NGC}"):
        find(docker, NGC)
    with pytest.raises(InputError, match="not an image an engine saved"):
        find(_tar(tmp_path / "x.tar", {"hello.txt": b"hi"}), NGC)


@pytest.mark.integration
def test_image_tar_for_a_plan_without_a_base_image_is_refused(tmp_path) -> None:
    docker = _tar(tmp_path / "d.tar", {"manifest.json": b"[]"})
    p = _envbuild("bundle", "cpu-reference", "--target", "local", "--image-tar", str(docker), "-o",
                  str(tmp_path / "b.tar"), home=tmp_path / "h")
    assert p.returncode == 2, p.stderr
    assert "runs in and builds from no base image" in p.stderr and not (tmp_path / "b.tar").exists()
