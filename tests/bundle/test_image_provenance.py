"""Issue 41: an image's provenance from outside it. A context rendered by envbuild, an image in a
real podman (its own storage: ``envbuild.testbed.podman``) carrying that context's labels,
``envbuild image-provenance IMAGE --context DIR --sign-key KEY -o FILE`` signs a statement whose
subject is the image ID, and ``--verify FILE --trusted-key KEY.pub`` accepts it; another key,
another image under the same name, and an image not built from the context are refused."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from envbuild.bundle import provenance as P
from envbuild.cli import main
from envbuild.testbed import podman as PM

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(PM.why_unavailable() is not None, reason=str(PM.why_unavailable()))]


def _key(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t", "-f", str(path)], check=True)
    return path


@pytest.fixture
def engine(tmp_path, monkeypatch):
    pm = PM.Podman(tmp_path / "podman")
    for name in ("CONTAINERS_STORAGE_CONF", "CONTAINERS_CONF", "TMPDIR"):
        monkeypatch.setenv(name, pm.env[name])
    yield pm
    pm.remove_all()


def _image(pm, tmp_path, tag: str, labels: dict[str, str], content: str) -> str:
    root = tmp_path / f"rootfs-{content}"
    root.mkdir()
    (root / "marker").write_text(content)
    pm.import_rootfs(root, tag, changes=[f'LABEL {k}="{v}"' for k, v in labels.items()], timeout=120)
    return pm("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()


def test_an_images_signed_provenance_names_its_id_and_its_context(engine, tmp_path, capsys):
    ctx = tmp_path / "ctx"
    assert main(["render", "cpu-reference", "--target", "local", "--format", "dockerfile", "-o", str(ctx)]) == 0
    dockerfile = (ctx / "Dockerfile").read_text()
    labels = dict(re.findall(r'(io\.envbuild\.(?:recipe|target|lock\.sha256|lock\.digest|plan\.sha256))="([^"]*)"', dockerfile))
    assert len(labels) == 5
    ident = _image(engine, tmp_path, "localhost/cpu-ref:1", labels, "one")
    key, other = _key(tmp_path / "maker"), _key(tmp_path / "other")
    out = tmp_path / "cpu-ref.intoto.jsonl"
    capsys.readouterr()
    assert main(["image-provenance", "localhost/cpu-ref:1", "--context", str(ctx), "--sign-key", str(key),
                 "-o", str(out), "--json"]) == 0
    stmt = json.loads(capsys.readouterr().out)
    assert stmt["subject"][0]["digest"]["sha256"] == ident
    build = stmt["predicate"]["buildDefinition"]
    assert build["buildType"] == P.IMAGE_BUILD_TYPE
    assert build["externalParameters"]["recipe"] == "cpu-reference"
    assert build["externalParameters"]["planDigest"] == labels["io.envbuild.plan.sha256"]
    names = {d["name"] for d in build["resolvedDependencies"]}
    assert {"context:Dockerfile", "context:envbuild.lock"} <= names
    # verified: the trusted key signed it and the engine's image has that ID
    assert main(["image-provenance", "localhost/cpu-ref:1", "--verify", str(out), "--trusted-key", f"{key}.pub"]) == 0
    assert f"image ID sha256:{ident}" in capsys.readouterr().out
    # another key: refused
    assert main(["image-provenance", "localhost/cpu-ref:1", "--verify", str(out), "--trusted-key", f"{other}.pub"]) == 1
    assert "not by a trusted key" in capsys.readouterr().err
    # another image under the same name (same labels, other content): refused
    _image(engine, tmp_path, "localhost/cpu-ref:1", labels, "two")
    assert main(["image-provenance", "localhost/cpu-ref:1", "--verify", str(out), "--trusted-key", f"{key}.pub"]) == 1
    assert "not the signed statement's" in capsys.readouterr().err
    # an image not built from this context (another plan digest): not signed, nothing written
    _image(engine, tmp_path, "localhost/other:1", {**labels, "io.envbuild.plan.sha256": "0" * 64}, "three")
    assert main(["image-provenance", "localhost/other:1", "--context", str(ctx), "--sign-key", str(key),
                 "-o", str(tmp_path / "other.intoto.jsonl")]) == 1
    assert "was not built from" in capsys.readouterr().err and not (tmp_path / "other.intoto.jsonl").exists()
