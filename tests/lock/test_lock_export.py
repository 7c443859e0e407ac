"""A lock exported as pylock.toml (PEP 751) and as a hashed requirements.txt installs exactly
the locked set: pylock.toml with uv, requirements.txt with pip (--require-hashes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.lock.serialize import dump_lock, read_lock
from envbuild.lock.uvresolve import uv_binary
from support.paths import ROOT

LOCK = ROOT / "lockfiles" / "cpu-reference" / "local.lock"
WHEELS = "/opt/wheels"
# no pip or uv configuration of this machine (its pip.conf names /opt/wheels as find-links): what
# the exported file says is all the installers get
NO_CONFIG = {**{k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))},
             "PIP_CONFIG_FILE": os.devnull}


def export(fmt: str, out: Path, capsys) -> str:
    assert main(["lock", "cpu-reference", "--target", "local", "--format", fmt,
                 "--wheelhouse", WHEELS, "-o", str(out)]) in (0, None)
    return out.read_text()


def installed(python: Path) -> dict[str, str]:
    code = ("import json, importlib.metadata as m; "
            "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))")
    import json

    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                                     check=True).stdout)


def expected() -> dict[str, str]:
    lock = read_lock(LOCK)
    return {p.name.lower(): p.version for p in lock.packages}


def test_export_without_a_wheelhouse_names_the_upstream_url_and_no_local_path(tmp_path):
    """torch's bytes were read from a wheelhouse when the lock was made; the export names where
    the same bytes live upstream, with their sha256, and no path of this machine."""
    out = tmp_path / "pylock.toml"
    assert main(["lock", "cpu-reference", "--target", "local", "--format", "pylock", "-o", str(out)]) in (0, None)
    text = out.read_text()
    torch = read_lock(LOCK).package("torch")
    assert torch.from_wheelhouse and torch.wheelhouse.upstream == "derived"
    url = "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert torch.dist.url == url and f'url = "{url}"' in text and torch.dist.sha256 in text
    assert "path =" not in text and "/opt/wheels" not in text and "wheelhouse/" not in text


def test_requirements_name_a_file_of_another_index_by_its_url(tmp_path):
    """pip looks for ``torch==2.13.0+cpu`` on PyPI, which has no such file: the export names the
    file of download.pytorch.org by its URL, beside its sha256; PyPI's files stay name==version."""
    out = tmp_path / "requirements.txt"
    assert main(["lock", "cpu-reference", "--target", "local", "--format", "requirements", "-o", str(out)]) in (0, None)
    lines = [x for x in out.read_text().splitlines() if not x.startswith("#")]
    torch = read_lock(LOCK).package("torch")
    assert f"torch @ {torch.dist.url} --hash=sha256:{torch.dist.sha256}" in lines
    assert all(x.startswith("torch @ ") or ("==" in x and " @ " not in x) for x in lines)


def test_a_lock_from_before_upstream_urls_needs_the_wheelhouse(tmp_path, capsys):
    """An older lock recorded a wheelhouse file as ``wheelhouse/<file>``: only the folder can
    say where its bytes are."""
    lock = read_lock(LOCK)
    packages = [p if p.name != "torch" else p.model_copy(update={
        "source": "wheelhouse", "wheelhouse": None,
        "dist": p.dist.model_copy(update={"url": f"wheelhouse/{p.dist.filename}"})}) for p in lock.packages]
    folder = tmp_path / "locks" / "cpu-reference"
    folder.mkdir(parents=True)
    (folder / "local.lock").write_text(dump_lock(lock.model_copy(update={"packages": packages}), "envbuild lock"))
    assert read_lock(folder / "local.lock").package("torch").from_wheelhouse
    rc = main(["lock", "cpu-reference", "--target", "local", "--lockdir", str(tmp_path / "locks"),
               "--format", "pylock"])
    err = capsys.readouterr().err
    assert rc == 2 and "--wheelhouse" in err and "no upstream URL" in err


def test_uv_binary_is_found_without_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert Path(uv_binary()).is_file()


@pytest.mark.integration
@pytest.mark.skipif(not Path(WHEELS).is_dir(), reason="needs the CPU torch wheel in /opt/wheels")
def test_pylock_installs_with_uv(tmp_path, capsys):
    text = export("pylock", tmp_path / "pylock.toml", capsys)
    assert 'lock-version = "1.0"' in text
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([uv_binary(), "pip", "install", "--no-config", "--python", str(venv / "bin" / "python"),
                    "-r", str(tmp_path / "pylock.toml")], check=True, capture_output=True, env=NO_CONFIG)
    got = installed(venv / "bin" / "python")
    assert {k: v for k, v in got.items() if k in expected()} == expected()
    # written through packaging's PEP 751 model: it reads back as one
    import tomllib

    from packaging.pylock import Pylock

    model = Pylock.from_dict(tomllib.loads(text))
    assert {str(p.name): str(p.version) for p in model.packages} == {
        k: v for k, v in expected().items() if k in {str(p.name) for p in model.packages}}


@pytest.mark.integration
@pytest.mark.skipif(not Path(WHEELS).is_dir(), reason="needs the CPU torch wheel in /opt/wheels")
def test_requirements_install_with_pip_require_hashes(tmp_path, capsys):
    text = export("requirements", tmp_path / "requirements.txt", capsys)
    assert all("--hash=sha256:" in line for line in text.splitlines() if not line.startswith(("#", "--find-links")))
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # --no-compile: what is installed is this test's subject, not the bytecode pip would compile
    # for every module of torch (16 s of the test's 31 s on 2 cores)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input", "--no-compile",
                    "--require-hashes", "--no-deps", "-r", str(tmp_path / "requirements.txt")],
                   check=True, capture_output=True, env=NO_CONFIG)
    got = installed(venv / "bin" / "python")
    assert {k: v for k, v in got.items() if k in expected()} == expected()
    # and with uv, from the same file: the same set
    other = tmp_path / "u"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    subprocess.run([uv_binary(), "pip", "install", "--no-config", "--python", str(other / "bin" / "python"),
                    "--require-hashes", "--no-deps", "-r", str(tmp_path / "requirements.txt")],
                   check=True, capture_output=True, env=NO_CONFIG)
    by_uv = installed(other / "bin" / "python")
    assert {k: v for k, v in by_uv.items() if k in expected()} == {k: v for k, v in got.items() if k in expected()}


def test_the_index_form_names_indexes_not_files_and_installs_from_a_sites_own_sources(tmp_path):
    """Issue 53: ``--export-form index`` writes ``name==version`` with its hash for every package
    and the other index as ``--extra-index-url`` (no ``torch @ https://...``), so a site's proxy
    or find-links serve the same bytes; pip installs exactly the lock from it, the hashes
    checked, with torch from a folder of wheels (download.pytorch.org is not reached here)."""
    out = tmp_path / "requirements.txt"
    assert main(["lock", "cpu-reference", "--target", "local", "--format", "requirements", "--export-form", "index",
                 "-o", str(out)]) in (0, None)
    lines = [x for x in out.read_text().splitlines() if not x.startswith("#")]
    torch = read_lock(LOCK).package("torch")
    assert lines[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert f"torch==2.13.0+cpu --hash=sha256:{torch.dist.sha256}" in lines
    assert not any(" @ " in x or "file:" in x or "--index-url" in x.split()[0:1] for x in lines)
    assert main(["lock", "cpu-reference", "--target", "local", "--format", "pylock", "--export-form", "index",
                 "-o", str(tmp_path / "pylock.toml")]) == 2  # PEP 751 names files: no index form
    if not any(Path(WHEELS).glob("torch-2.13.0*cp311*.whl")):
        pytest.skip("no torch 2.13.0 wheel in /opt/wheels to stand for a site's own source")
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # pip passes over the unreachable index (a warning) and takes torch from the folder, its hash checked
    p = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input", "--no-compile",
                        "--retries", "0", "--timeout", "5", "--require-hashes", "--no-deps", "--find-links", WHEELS,
                        "-r", str(out)], capture_output=True, text=True, env=NO_CONFIG)
    assert p.returncode == 0, p.stderr[-2000:]
    got = installed(venv / "bin" / "python")
    assert {k: v for k, v in got.items() if k in expected()} == expected()


def test_a_wheelhouse_is_named_relative_to_the_export_never_by_a_path_of_this_machine(tmp_path):
    """``--wheelhouse DIR``: the files taken from it are found relative to the exported file
    (pylock's ``path``, a requirements file's ``--find-links``), which travels with its folder;
    no ``file://`` and no absolute path of the exporting machine is written."""
    wheels = tmp_path / "share" / "wheels"
    wheels.mkdir(parents=True)
    torch = read_lock(LOCK).package("torch")
    (wheels / torch.dist.filename).write_bytes(b"stand-in")
    out = tmp_path / "share" / "locks"
    out.mkdir()
    for fmt, name in (("pylock", "pylock.cpu-reference.toml"), ("requirements", "requirements.txt")):
        assert main(["lock", "cpu-reference", "--target", "local", "--format", fmt, "--wheelhouse", str(wheels),
                     "-o", str(out / name)]) in (0, None)
        text = (out / name).read_text()
        assert "file://" not in text and str(tmp_path) not in text, text
    pylock = (out / "pylock.cpu-reference.toml").read_text()
    rel = pylock.split('path = "', 1)[1].split('"', 1)[0]
    assert rel == f"../wheels/{torch.dist.filename}" and (out / rel).is_file()
    req = (out / "requirements.txt").read_text().splitlines()
    assert "--find-links ../wheels" in req and f"torch==2.13.0+cpu --hash=sha256:{torch.dist.sha256}" in req


def test_pylock_file_names_are_the_ones_pep_751_allows(tmp_path, capsys):
    for bad in ("my.lock.toml", "pylock.a.b.toml", "pylock..toml", "pylock.toml.txt"):
        rc = main(["lock", "cpu-reference", "--target", "local", "--format", "pylock", "-o", str(tmp_path / bad)])
        assert rc == 2 and "pylock.toml or pylock.<name>.toml" in capsys.readouterr().err, bad
        assert not (tmp_path / bad).exists()
    for good in ("pylock.toml", "pylock.cpu-reference.toml"):
        assert main(["lock", "cpu-reference", "--target", "local", "--format", "pylock", "-o",
                     str(tmp_path / good)]) in (0, None)
        assert (tmp_path / good).is_file()
