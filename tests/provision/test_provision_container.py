"""`envbuild provision --backend container` for real: cpu-reference's image built on this
machine (the local node) by podman through the playbook, checked and smoke-tested inside it.

The run's one podman storage (``podman_store`` of tests/conftest.py: its own storage.conf,
containers.conf and TMPDIR), the base image imported from the chroot testbed's cached debootstrap
rootfs (bookworm minbase with python3-venv), given with ``--base``; the podman options are data passed on the
command line (``--engine-arg=--isolation=chroot``: host network so pip reaches PyPI inside the
build, the host's CA bundle as PIP_CERT; ``--engine-env`` for the storage), never hard-coded.
The CPU torch wheel comes from ``--wheelhouse /opt/wheels`` into the context's wheelhouse/.

The tests run in file order and share the node. The store already holds the image that
``envbuild render --format dockerfile`` of the same recipe built (the ``image`` fixture: one cold
build per run): the backend's context is that Dockerfile, so its first provision builds with
every layer from the cache (what is built by hand and by the playbook is one image) and must
pass the report; the second changes nothing (no Ansible: the image and its labels hold, each
step's marker matches); then a lock with another tqdm (recipe and lock copied: the recipe pins
tqdm, so a lock alone with another version would be refused as stale) rebuilds the image
(its context digest label changes) and the new tqdm is observed inside it.

Not exercised here: docker (no daemon runs here) and enroot (not installable here; the
import step is checked as data in tests/plan/test_container_plan.py), GPUs in the container.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.paths import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WHEELS = Path("/opt/wheels")
BASE = "localhost/envbuild-base:bookworm"
TAG = "localhost/envbuild/cpu-reference:local"


@pytest.fixture(scope="module")
def node(module_tmp, image):
    root = module_tmp("container-backend")
    mp = pytest.MonkeyPatch()
    mp.setenv("ENVBUILD_HOME", str(root / "home"))
    mp.chdir(ROOT)
    state = {"podman": image["podman"], "root": root, "prefix": str(root / "env"), "runs": [],
             "rendered": image}
    try:
        yield state
    finally:
        mp.undo()
        image["podman"]("rmi", "-f", TAG, check=False)


def provision(node, *extra: str) -> tuple[int, Path, float]:
    """One `envbuild provision --backend container` on the local node: (rc, run dir, seconds)."""
    from envbuild.cli import main

    home = node["root"] / "home" / "runs"
    before = set(home.glob("*")) if home.is_dir() else set()
    t0 = time.monotonic()
    rc = main(["provision", "--target", "local", "--backend", "container", "--base", BASE,
               "--wheelhouse", str(WHEELS), "--prefix", node["prefix"], *node["podman"].provision_args(),
               "--json", *extra])
    took = time.monotonic() - t0
    [run] = [p for p in set(home.glob("*")) - before if p.name != "latest"]
    node["runs"].append((run, took))
    return rc, run, took


def labels(node) -> dict:
    out = node["podman"]("image", "inspect", TAG)
    data = json.loads(out.stdout)[0]
    return {"id": data["Id"], **data["Config"]["Labels"]}


def layers(node, tag: str = TAG) -> list[str]:
    """The image's layer digests, base first."""
    out = node["podman"]("image", "inspect", "--format", "{{json .RootFS.Layers}}", tag)
    return json.loads(out.stdout)


def verdict(run: Path) -> str:
    from envbuild.report import collect

    return collect(run).verdict.status


@pytest.fixture(scope="module")
def first(node):
    rc, run, took = provision(node)
    return {"rc": rc, "run": run, "took": took, "image": labels(node) if rc == 0 else {},
            "layers": layers(node) if rc == 0 else []}


def test_first_provision_builds_the_image_and_passes(node, first) -> None:
    run = first["run"]
    res = json.loads((run / "nodes/local/result.json").read_text())
    assert first["rc"] == 0, (res.get("failed_step"), res.get("log_tail", "")[-3000:])
    assert res["status"] == "ok"
    assert set(res["changed"]) >= {"image", "import-check", "smoke"}
    plan = json.loads((run / "nodes/local/plan.json").read_text())
    assert plan["backend"] == "container" and [s["id"] for s in plan["steps"]] == [
        "preflight", "image", "import-check", "smoke"]
    image = next(s for s in plan["steps"] if s["id"] == "image")["params"]
    # built by the playbook with the planned labels: the context digest, the image plan's digest
    for key, value in image["labels"].items():
        assert first["image"][key] == value, key
    assert first["image"]["io.envbuild.lock.digest"] == plan["lock_digest"]
    # the import check and the smoke ran inside the image; their outputs are in the run
    smoke = run / "nodes/local/smoke"
    check = json.loads((smoke / "import-check.out").read_text())
    assert check["ok"] is True and check["imported"]["torch"] == "2.13.0+cpu"
    assert (smoke / "import-check.rc").read_text().strip() == "0"
    results = json.loads((run / "nodes/local/smoke.json").read_text())
    assert {"gpt", "collective"} <= set(results)
    observed = json.loads((run / "nodes/local/observed.json").read_text())
    assert observed["prefix"] == "/opt/envbuild/cpu-reference"
    assert observed["packages"]["tqdm"] == "4.70.1"
    assert verdict(run) == "PASS"
    # the playbook's context is the rendered one that the image fixture built: this build made
    # no layer of its own (one image, whether built by hand or by provision)
    assert first["layers"] == layers(node, node["rendered"]["tag"])


def test_second_provision_does_nothing(node, first) -> None:
    assert first["rc"] == 0
    rc, run, took = provision(node)
    assert rc == 0
    meta = json.loads((run / "run.json").read_text())
    assert meta["ansible"].startswith("not started"), meta
    res = json.loads((run / "nodes/local/result.json").read_text())
    assert res["skipped"] == ["preflight", "image", "import-check", "smoke"] and res["changed"] == []
    log = (run / "nodes/local/log.txt").read_text()
    assert f"skipped image: done; image {TAG} with 3 planned label(s)" in log
    assert labels(node)["id"] == first["image"]["id"]
    assert verdict(run) == "PASS"
    assert took < 60, took


def test_a_changed_lock_rebuilds_the_image(node, first, tmp_path) -> None:
    from envbuild.testbed.relock import pypi_wheel, with_version

    assert first["rc"] == 0
    url, sha = pypi_wheel("tqdm", "4.67.1")
    recipe, lock = with_version(tmp_path, "cpu-reference", "local", "tqdm", "4.67.1", sha, url)
    rc, run, _ = provision(node, "--recipe", str(recipe), "--lock", str(lock))
    res = json.loads((run / "nodes/local/result.json").read_text())
    assert rc == 0, (res.get("failed_step"), res.get("log_tail", "")[-3000:])
    assert set(res["changed"]) >= {"image", "import-check", "smoke"}
    now = labels(node)
    assert now["id"] != first["image"]["id"]
    assert now["io.envbuild.context.sha256"] != first["image"]["io.envbuild.context.sha256"]
    observed = json.loads((run / "nodes/local/observed.json").read_text())
    assert observed["packages"]["tqdm"] == "4.67.1"
    assert verdict(run) == "PASS"
    # the layers before the changed install were reused, that install and the ones after it
    # are new
    now_layers = layers(node)
    shared = next((i for i, (a, b) in enumerate(zip(first["layers"], now_layers)) if a != b), None)
    assert shared is not None and shared > 1, (first["layers"], now_layers)  # the base and more
