"""A published setup that cannot be bundled as shipped says which file is missing, why, and the
commands that supply it (issue 39): a locked package whose index this machine cannot reach, a
source without a git mirror, a data file without network. The torch hint is followed here: the
re-lock it names, with a wheel of that name and version in the wheelhouse (download.pytorch.org
is unreachable here, so a stand-in file of that name is what the wheelhouse holds), records the
file's sha256 in the lock."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from envbuild.bundle.pack import mirror_hint


def envbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ENVBUILD_GIT_MIRROR"}
    return subprocess.run([sys.executable, "-m", "envbuild", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def wheel(folder: Path, name: str, version: str, tag: str) -> Path:
    """A minimal valid wheel of that name and version (METADATA, WHEEL, RECORD)."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"__version__ = {version!r}\n".encode(),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()}
    record = [f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b'=').decode()},{len(v)}"
              for k, v in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return path


def test_the_mirror_hint_names_the_folder_a_bundle_looks_in():
    assert mirror_hint("https://github.com/saforem2/ambivalent") == (
        "on a machine that reaches it: git clone --mirror https://github.com/saforem2/ambivalent "
        "DIR/saforem2/ambivalent.git; then pass --git-mirror DIR")


@pytest.mark.integration
def test_a_missing_torch_file_is_named_with_the_commands_that_supply_it(tmp_path):
    got = envbuild("bundle", "alpa-megatron", "--target", "azure-nd96", "-o", str(tmp_path / "b.tar"), cwd=tmp_path)
    assert got.returncode == 1, got.stderr
    assert "torch 1.8.2+cu111: the lock has no file for it (not verified: index download.pytorch.org" in got.stderr
    want = ("python -m pip download --no-deps --only-binary=:all: --python-version 3.8 --platform linux_x86_64 "
            "--find-links https://download.pytorch.org/whl/lts/1.8/torch_lts.html -d WHEELS torch==1.8.2+cu111; "
            "then envbuild lock alpa-megatron --target azure-nd96 --wheelhouse WHEELS")
    assert want in " ".join(got.stderr.split()), got.stderr
    assert "Traceback" not in got.stderr and not (tmp_path / "b.tar").exists()

    wheels = tmp_path / "WHEELS"
    wheels.mkdir()
    whl = wheel(wheels, "torch", "1.8.2+cu111", "cp38-cp38-linux_x86_64")
    lock = tmp_path / "alpa.lock"
    done = envbuild("lock", "alpa-megatron", "--target", "azure-nd96", "--wheelhouse", str(wheels), "-o", str(lock),
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (torch,) = [p for p in yaml.safe_load(lock.read_text())["packages"] if p["name"] == "torch"]
    assert torch["verified"] is True and torch["version"] == "1.8.2+cu111"
    assert torch["dist"]["filename"] == whl.name
    assert torch["dist"]["sha256"] == hashlib.sha256(whl.read_bytes()).hexdigest()
    assert "NOT HASHED" not in lock.read_text()  # the header's account of it is gone with it (issue 53)

    # the Dockerfile renders from that lock, torch by the recorded sha256 (without it: refused, above)
    out = tmp_path / "image"
    rendered = envbuild("render", "alpa-megatron", "--target", "azure-nd96", "--format", "dockerfile",
                        "--lock", str(lock), "-o", str(out), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert torch["dist"]["sha256"] in "".join(p.read_text() for p in out.rglob("*") if p.is_file())


@pytest.mark.integration
def test_render_names_the_missing_torch_file_and_writes_nothing(tmp_path):
    out = tmp_path / "image"
    got = envbuild("render", "alpa-megatron", "--target", "azure-nd96", "--format", "dockerfile", "-o", str(out),
                   cwd=tmp_path)
    assert got.returncode == 1, got.stderr
    said = " ".join(got.stderr.split())
    assert "torch 1.8.2+cu111: not verified: index download.pytorch.org unreachable" in said
    assert ("python -m pip download --no-deps --only-binary=:all: --python-version 3.8 --platform linux_x86_64 "
            "--find-links https://download.pytorch.org/whl/lts/1.8/torch_lts.html -d WHEELS torch==1.8.2+cu111; "
            "then envbuild lock alpa-megatron --target azure-nd96 --wheelhouse WHEELS") in said
    assert "--allow-unverified NAME" in said and "Traceback" not in got.stderr and not out.exists()


def test_a_data_file_without_network_names_the_file_the_mirror_must_hold(tmp_path):
    from envbuild.bundle.fetch import fetch_data_file
    from envbuild.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem) as got:
        fetch_data_file("oscar-1gb", "https://127.0.0.1:9/stas/oscar-1GB.jsonl.xz", None,
                        tmp_path / "data" / "oscar-1GB.jsonl.xz", None)  # unpinned: https only (issue 54)
    assert got.value.hint == ("on a machine that reaches it: curl -fL -o DIR/oscar-1GB.jsonl.xz "
                              "https://127.0.0.1:9/stas/oscar-1GB.jsonl.xz; then pass --data-mirror DIR")
    assert not (tmp_path / "data" / "oscar-1GB.jsonl.xz").exists()
