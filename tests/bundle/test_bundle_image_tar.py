"""A container recipe's base image carried in its bundle (``envbuild bundle --image-tar``) and
loaded on the node instead of pulled (issue 53, item 6).

A small base image is made here by the test bed's podman (the chroot test bed's cached bookworm
rootfs, its documentation, locales and caches left out) and saved with ``podman save``; a
container recipe over it (one wheel, six) is locked and bundled. Without ``--image-tar`` the
bundle says "offline: no" naming the base image; with it "offline: yes", the image's ID as
podman gave it recorded. ``provision --bundle`` then runs the container backend on this machine
with a podman storage of its own that has never held the base image, building with
``--network=none --pull=never``: the node loads the base image from its copy of the bundle, the
image's pip installs ``--no-index`` from the bundle's wheels, and the import check passes in the
built image.

Also here, without an engine: the container plan from a bundle, and ``check_plan``'s refusal of
an image build that would still clone a git source from its remote.
"""

from __future__ import annotations

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

BASE = "localhost/envbuild-tiny:base"
TAG = "localhost/envbuild/tiny-box:local"
# what the small base leaves out of the test bed's rootfs (python3.11 and its venv stay)
SLIM = ("./var/cache", "./var/lib/apt/lists", "./usr/share/doc", "./usr/share/man", "./usr/share/locale",
        "./usr/share/info", "./usr/share/perl", "./usr/lib/git-core", "./usr/share/zoneinfo")


def _recipe(base: str, **extra) -> dict:
    return {"schema": 1, "name": "tiny-box", "title": "A container recipe over a small local base image",
            "description": "six into a venv over the base image's python", "python": "3.11",
            "targets": ["local"], "published": {"url": "https://example.invalid/tiny-box"},
            "environment": {"kind": "container", "base_image": base},
            "packages": [{"name": "six", "version": "1.17.0", "why": "one small wheel"}],
            "import_check": ["six"], **extra}


def _envbuild(*argv: str, home: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ENVBUILD_GIT_MIRROR"}
    return subprocess.run([sys.executable, "-m", "envbuild", *argv], capture_output=True, text=True,
                          env={**env, "ENVBUILD_HOME": str(home)}, timeout=timeout, cwd=ROOT)


def _manifest(path: Path) -> Manifest:
    with tarfile.open(path) as tar:
        return Manifest.model_validate_json(tar.extractfile(MANIFEST).read())


@pytest.fixture(scope="module")
def made(module_tmp, remove_tree):
    from envbuild.testbed.chroot import rootfs, why_unavailable
    from envbuild.testbed.podman import Podman
    from envbuild.testbed.podman import why_unavailable as no_podman

    if why := no_podman() or why_unavailable():
        pytest.skip(why)
    base = module_tmp("image-tar")
    maker = Podman(base / "maker")  # the machine that has the image
    node = Podman(base / "node")  # the node's engine: it never held the base image
    try:
        maker.import_rootfs(rootfs(), BASE, exclude=SLIM)
        saved = base / "base.tar"
        maker("save", "-o", str(saved), BASE)
        image_id = maker("image", "inspect", "--format", "{{.Id}}", BASE).stdout.strip()
        recipe = base / "tiny-box.yaml"
        recipe.write_text(yaml.safe_dump(_recipe(BASE), sort_keys=False))
        home, lock = base / "home", base / "tiny-box.lock"
        p = _envbuild("lock", str(recipe), "--target", "local", "-o", str(lock), home=home)
        assert p.returncode == 0, p.stderr[-3000:]
        common = [str(recipe), "--target", "local", "--lock", str(lock), "--json"]
        without = _envbuild("bundle", *common, "-o", str(base / "without.tar"), home=home)
        with_image = _envbuild("bundle", *common, "--image-tar", str(saved), "--offline", "-o", str(base / "b.tar"),
                               home=home)
        assert with_image.returncode == 0, with_image.stderr[-3000:]
        yield {"base": base, "home": home, "node": node, "id": image_id, "bundle": base / "b.tar",
               "without": without, "with": json.loads(with_image.stdout)}
    finally:
        node("system", "reset", "--force", check=False, timeout=120)
        maker("system", "reset", "--force", check=False, timeout=120)
        remove_tree(base)


@pytest.mark.integration
@pytest.mark.slow
def test_without_the_image_the_bundle_says_offline_no_naming_it(made) -> None:
    p = made["without"]
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert res["offline"] is False
    (need,) = res["needs_network"]
    assert (need["kind"], need["what"]) == ("base-image", BASE) and need["step"].endswith(": environment"), need
    assert "--image-tar" in need["fix"]
    assert _manifest(made["base"] / "without.tar").offline is False


@pytest.mark.integration
@pytest.mark.slow
def test_with_the_image_the_bundle_carries_it_and_is_offline(made) -> None:
    res = made["with"]
    assert res["offline"] is True and res["needs_network"] == []
    (image,) = res["images"]
    assert image["name"] == BASE and image["id"] == made["id"]
    m = _manifest(made["bundle"])
    assert m.offline is True and m.image(BASE).id == made["id"]
    (f,) = [f for f in m.files if f.kind == "image"]
    assert f.path == image["path"] and f.size == (made["base"] / "base.tar").stat().st_size


@pytest.fixture(scope="module")
def provisioned(made):
    node = made["node"]
    args = [a for a in node.provision_args() if a != "--engine-arg=--isolation=chroot"]
    prefix = made["base"] / "env"
    p = _envbuild("provision", "--target", "local", "--bundle", str(made["bundle"]), "--bundle-sha256",
                  made["with"]["sha256"], "--prefix", str(prefix), "--no-smoke", "--json", *args,
                  "--engine-arg=--network=none", "--engine-arg=--pull=never", home=made["home"], timeout=1500)
    runs = sorted(p for p in (made["home"] / "runs").iterdir() if p.name != "latest")
    return {"proc": p, "run": runs[-1]}


@pytest.mark.integration
@pytest.mark.slow
def test_the_node_loads_the_base_image_from_the_bundle_and_builds_offline(made, provisioned) -> None:
    run = provisioned["run"]
    res = json.loads((run / "nodes/local/result.json").read_text())
    assert res["status"] == "ok", (provisioned["proc"].stderr[-2000:], res.get("log_tail", "")[-3000:])
    plan = json.loads((run / "nodes/local/plan.json").read_text())
    assert [s["id"] for s in plan["steps"]] == ["preflight", "bundle", "image", "import-check"]
    image = next(s for s in plan["steps"] if s["id"] == "image")["params"]
    assert image["base_archive"].endswith("/.envbuild/bundle/" + made["with"]["images"][0]["path"][len("node/"):])
    assert set(res["changed"]) >= {"bundle", "image", "import-check"}
    log = (run / "nodes/local/log.txt").read_text()
    assert f"podman load -i {image['base_archive']}" in log and f"Loaded image: {BASE}" in log
    assert "--network=none --pull=never" in log and "--no-index" in log
    node = made["node"]
    assert node("image", "inspect", "--format", "{{.Id}}", BASE).stdout.strip() == made["id"]
    assert node("image", "inspect", "--format", "{{.Id}}", TAG).returncode == 0
    check = json.loads((run / "nodes/local/smoke/import-check.out").read_text())
    assert check["ok"] is True and "six" in check["imported"]
    assert json.loads((run / "run.json").read_text())["bundle"]["offline"] is True


# --- the plan from a bundle, without an engine ----------------------------------------------

def _container_plan(tmp_path: Path, recipe: dict, images: dict[str, str]):
    from envbuild.facts.profile import from_target
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.params import BundleParams
    from envbuild.plan.resolve import resolve
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    facts = from_target(load_target("local")).model_copy(update={"container_engines": {"podman": "/usr/bin/podman"}})
    bundle = BundleParams(digest="0" * 64, src=str(tmp_path), files=[], images=images)
    opts = PlanOptions(prefix="/opt/envs/tb", backend="container", bundle=bundle)
    return resolve(load_recipe(str(path)), load_target("local"), facts, None, opts).plan


def test_the_container_plan_from_a_bundle_stages_it_and_loads_the_base_from_it(tmp_path) -> None:
    from envbuild.bundle.network import needs
    from envbuild.render.steps import step_actions

    plan = _container_plan(tmp_path, _recipe(BASE), {BASE: "images/base.tar"})
    assert [s.id for s in plan.steps] == ["preflight", "bundle", "image", "import-check", "smoke"]
    image = plan.image()
    assert image.params.base_archive == "/opt/envs/tb/.envbuild/bundle/images/base.tar"
    pips = [s.params for s in image.params.image.plan.pip_installs()]
    assert pips and all(p.no_index and p.find_links == ["/opt/envbuild/wheelhouse"] for p in pips)
    first = step_actions(image, plan.prefix)[0]
    assert first.argv == ["podman", "load", "-i", "/opt/envs/tb/.envbuild/bundle/images/base.tar"]
    assert needs([plan], [BASE]) == []
    assert [n.kind for n in needs([plan])] == ["base-image"]  # the same plan, the image not carried


def test_an_image_build_that_still_clones_a_source_is_refused_naming_it(tmp_path) -> None:
    from envbuild.bundle.manifest import Manifest
    from envbuild.bundle.unpack import Opened
    from envbuild.errors import CheckFailed

    src = {"name": "proj", "url": "https://github.com/acme/proj", "ref": "main", "sha": "1" * 40,
           "install": "none", "why": "a tree"}
    plan = _container_plan(tmp_path, _recipe(BASE, sources=[src]), {})
    b = Opened(file=tmp_path / "b.tar", digest="0" * 64, root=tmp_path,
               manifest=Manifest(recipe="tiny-box", target="local", lock_digest="", envbuild_version="0", python="3.11"))
    with pytest.raises(CheckFailed) as got:
        b.check_plan(plan)
    said = got.value.message
    assert "step image: git-remote https://github.com/acme/proj (needs the network: the image build clones proj" in said
    assert "six 1.17.0 for the image build (no such file in the bundle)" in said
    assert "base-image" not in said  # the node may hold it: said by the bundle's offline: no, not refused


@pytest.mark.integration
@pytest.mark.slow
def test_a_bundle_without_the_image_provisions_a_node_that_holds_it_and_the_report_says_so(made, provisioned) -> None:
    """The base image is not refused when the bundle lacks it: this node holds it (loaded above);
    the run records the bundle's offline: no and the report says so."""
    node = made["node"]
    args = [a for a in node.provision_args() if a != "--engine-arg=--isolation=chroot"]
    without = json.loads(made["without"].stdout)
    p = _envbuild("provision", "--target", "local", "--bundle", str(made["base"] / "without.tar"), "--bundle-sha256",
                  without["sha256"], "--prefix", str(made["base"] / "env2"), "--no-smoke", "--json", *args,
                  "--engine-arg=--network=none", "--engine-arg=--pull=never", home=made["home"], timeout=1500)
    run = sorted(p for p in (made["home"] / "runs").iterdir() if p.name != "latest")[-1]
    res = json.loads((run / "nodes/local/result.json").read_text())
    assert res["status"] == "ok", (p.stderr[-2000:], res.get("log_tail", "")[-3000:])
    assert "podman load" not in (run / "nodes/local/log.txt").read_text()
    assert json.loads((run / "run.json").read_text())["bundle"]["offline"] is False
    md = _envbuild("report", str(run), home=made["home"]).stdout
    assert "the bundle said offline: no (its manifest names what the node still fetched)" in md
