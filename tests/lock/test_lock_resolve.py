"""Python resolution for the target's interpreter and platform, with real uv against PyPI."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from envbuild.errors import InputError
from envbuild.lock import make_lock
from envbuild.fsio import sha256_file
from envbuild.lock.uvresolve import install_order, parse_via, platform_tags, python_platform
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target
from support import paths

DATA = paths.DATA / "lock"


def _recipe(packages: list[dict], python: str = "3.11", as_of: str | None = "2025-01-15", **extra) -> Recipe:
    data = {"schema": 1, "name": "tiny", "title": "t", "description": "d",
            "published": {"url": "https://example.org"}, "python": python, "targets": ["lab"],
            "packages": [{"why": "test", **p} for p in packages]}
    if as_of:
        data["resolve_as_of"] = as_of
    data.update(extra)
    return Recipe.model_validate(data)


@pytest.fixture(scope="module")
def lab():
    return load_target(DATA / "lab.yaml")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "envbuild-cache"))


# ---- pure parts ---------------------------------------------------------------------------

def test_python_platform_from_glibc():
    assert python_platform("x86_64", "2.31") == "x86_64-manylinux_2_31"
    assert python_platform("x86_64", "2.30") == "x86_64-manylinux_2_28"  # newest not above it
    assert python_platform("aarch64", "2.17") == "aarch64-manylinux_2_17"
    assert python_platform("x86_64", "2.41") == "x86_64-manylinux_2_40"
    with pytest.raises(InputError):
        python_platform("x86_64", "2.12")
    assert platform_tags("3.9", "x86_64-manylinux_2_31") == ["cp39", "manylinux_2_31_x86_64"]


def test_parse_via_and_install_order():
    text = ("certifi==2024.12.14\n    # via requests\nidna==3.10\n    # via\n    #   requests\n"
            "    #   -r recipe.in\nrequests==2.32.3\n    # via -r recipe.in\n")
    via = parse_via(text)
    assert via == {"certifi": ["requests"], "idna": ["recipe", "requests"], "requests": ["recipe"]}
    order = install_order(via)
    assert order.index("certifi") < order.index("requests") and order.index("idna") < order.index("requests")
    assert install_order({"a": ["b"], "b": ["a"]}) == ["a", "b"]  # a cycle still gives an order


# ---- real uv against PyPI -------------------------------------------------------------------

@pytest.mark.integration
def test_exact_versions_hashes_and_dependency_order(lab):
    lock = make_lock(_recipe([{"name": "six", "version": "1.16.0"},
                              {"name": "requests", "version": ">=2.31,<3"}]), lab)
    by = {p.name: p for p in lock.packages}
    assert by["six"].version == "1.16.0" and by["six"].requested == "1.16.0"
    assert Version(by["requests"].version) in __import__("packaging.specifiers").specifiers.SpecifierSet(">=2.31,<3")
    for pkg in lock.packages:
        assert pkg.verified and pkg.source == "pypi"
        assert len(pkg.dist.sha256) == 64 and pkg.dist.url.endswith(pkg.dist.filename)
        Version(pkg.version)  # exact
    names = [p.name for p in lock.packages]
    for dep in ("idna", "urllib3", "certifi", "charset-normalizer"):
        assert "requests" in by[dep].required_by
        assert names.index(dep) < names.index("requests")


@pytest.mark.integration
def test_target_python_not_this_machine(lab):
    """numpy wheels are per CPython: 3.9 gets another version and a cp39 file than 3.11."""
    locks = {py: make_lock(_recipe([{"name": "numpy", "version": ">=1.20"}], python=py), lab)
             for py in ("3.9", "3.11")}
    np39, np311 = (locks[py].package("numpy") for py in ("3.9", "3.11"))
    assert "cp39" in np39.dist.filename and "cp311" in np311.dist.filename
    assert np39.version != np311.version  # numpy 2.1+ dropped Python 3.9
    assert "manylinux" in np39.dist.filename
    assert locks["3.9"].platform.tags == ["cp39", "manylinux_2_31_x86_64"]


@pytest.mark.integration
def test_resolve_as_of_limits_versions(lab):
    old = make_lock(_recipe([{"name": "idna", "version": ">=2"}], as_of="2022-01-01"), lab)
    new = make_lock(_recipe([{"name": "idna", "version": ">=2"}], as_of="2025-01-15"), lab)
    assert Version(old.package("idna").version) < Version(new.package("idna").version)


@pytest.mark.integration
def test_no_such_version_lists_existing(lab):
    with pytest.raises(InputError) as err:
        make_lock(_recipe([{"name": "six", "version": "9.9.9"}]), lab)
    assert "six" in err.value.message and "9.9.9" in err.value.message
    assert "1.16.0" in err.value.hint  # the versions that do exist


def test_unreachable_index_is_unverified_and_kept_out(lab):
    lock = make_lock(_recipe([
        {"name": "torch", "version": "1.8.2", "cuda": "cu111", "index_kind": "find-links",
         "index": "http://127.0.0.1:9/whl/lts/1.8/torch_lts.html"}]), lab)
    (torch,) = lock.packages
    assert torch.version == "1.8.2+cu111" and not torch.verified and torch.dist is None
    assert torch.reason.startswith("not verified: index 127.0.0.1 unreachable")
    assert torch.source == "http://127.0.0.1:9/whl/lts/1.8/torch_lts.html"


@pytest.mark.integration
def test_preinstalled_is_provided_by_not_resolved(lab):
    lock = make_lock(_recipe([{"name": "numpy", "version": "1.21.6", "preinstalled": True},
                              {"name": "six", "version": "1.16.0"}],
                             environment={"kind": "container", "base_image": "example.org/img:1"}), lab)
    numpy = lock.package("numpy")
    assert numpy.source == "preinstalled" and numpy.provided_by == "image example.org/img:1"
    assert numpy.dist is None and not numpy.verified
    assert [p.name for p in lock.packages] == ["numpy", "six"]


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal valid pure-Python wheel, written by hand."""
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return out


@pytest.mark.integration
def test_wheelhouse_serves_off_index_package(lab, tmp_path):
    house = tmp_path / "wheels"
    house.mkdir()
    wheel = _wheel(house, "envbuild_probe", "0.3.1")
    lock = make_lock(_recipe([
        {"name": "envbuild-probe", "version": "0.3.1", "index_kind": "find-links",
         "index": "http://127.0.0.1:9/simple/"},
        {"name": "six", "version": "1.16.0"}]), lab, wheelhouse=house)
    probe = lock.package("envbuild-probe")
    assert probe.verified and probe.from_wheelhouse and probe.source == "http://127.0.0.1:9/simple/"
    # the bytes came from the wheelhouse; the lock names them upstream (the page does not answer:
    # a flat find-links page links its files beside itself)
    assert probe.dist.url == f"http://127.0.0.1:9/simple/{wheel.name}"
    assert probe.wheelhouse.upstream == "derived" and "find-links" in probe.wheelhouse.how
    assert probe.dist.sha256 == sha256_file(wheel) and probe.dist.filename == wheel.name
    assert str(tmp_path) not in yaml.safe_dump(lock.model_dump(mode="json"))  # no machine paths
    assert lock.package("six").source == "pypi"


@pytest.mark.integration
def test_no_build_isolation_sdist_is_locked_without_building(lab):
    """flash-attn's setup.py imports torch: its sdist is locked, its metadata is not built."""
    lock = make_lock(_recipe([{"name": "flash-attn", "version": "2.4.2", "build_isolation": False}],
                             python="3.10", as_of="2024-01-26"), lab)
    (fa,) = lock.packages
    assert fa.dist.kind == "sdist" and fa.dist.filename.endswith(".tar.gz") and len(fa.dist.sha256) == 64
    assert fa.note.startswith("dependencies not resolved")
