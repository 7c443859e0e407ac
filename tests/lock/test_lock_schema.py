"""The lock file format: golden text, round trip, unknown schema (pure, no network)."""

from __future__ import annotations

import os

import pytest

from envbuild.errors import CheckFailed, InputError
from envbuild.lock import Dist, Lock, LockedGit, LockedPackage, dump_lock, parse_lock, regenerate_command
from envbuild.lock.schema import Named, PlatformInfo
from support.paths import DATA

GOLDEN = DATA / "lock" / "golden.lock"


def _lock() -> Lock:
    return Lock(
        recipe=Named(name="tiny", digest="a" * 64), target=Named(name="lab", digest="b" * 64),
        python="3.9", platform=PlatformInfo(python_platform="x86_64-manylinux_2_31",
                                            tags=["cp39", "manylinux_2_31_x86_64"]),
        resolve_as_of="2022-05-04", envbuild_version="0.1.0",
        packages=[
            LockedPackage(name="numpy", version="1.21.6", source="preinstalled", required_by=["recipe"],
                          provided_by="image example.org/base:1", verified=False,
                          reason="not resolved: provided by image example.org/base:1"),
            LockedPackage(name="torch", version="1.8.2+cu111", required_by=["recipe"], verified=False,
                          source="https://download.pytorch.org/whl/lts/1.8/torch_lts.html",
                          reason="not verified: index download.pytorch.org unreachable from here"),
            LockedPackage(name="six", version="1.16.0", source="pypi", required_by=["recipe"],
                          requested="1.16.0", verified=True,
                          dist=Dist(kind="wheel", filename="six-1.16.0-py2.py3-none-any.whl",
                                    url="https://files.example/six-1.16.0-py2.py3-none-any.whl",
                                    sha256="8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254")),
        ],
        git=[LockedGit(name="megatron", url="https://github.com/zhisbug/Megatron-LM",
                       ref="alpa-osdi22-benchmark", sha="c28bbd208d16ffea61fa3c545e66b3a9d87f9d84",
                       verified=True, ancestors_checked=["b31e1296354e979722627a6c4dedafe19b51fa97"],
                       commit_date="2021-11-12T17:16:06-08:00", subject="currently disable tie embedding"),
             LockedGit(name="megatron-fairseq", url="https://github.com/ngoyal2707/Megatron-LM",
                       ref="fairseq_v3", sha="fa6c0860b62e4ed2ac13a513e7d950d72f576a44", verified=False,
                       reason="not verified: no mirror for https://github.com/ngoyal2707/Megatron-LM")])


def test_golden_text():
    text = dump_lock(_lock(), regenerate_command("tiny", "lab", git_mirror=True))
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "lock format changed; rerun with ENVBUILD_UPDATE_GOLDEN=1 and review"


def test_round_trip_is_identity():
    lock = _lock()
    text = dump_lock(lock, "envbuild lock tiny --target lab")
    assert parse_lock(text, "x.lock") == lock
    assert dump_lock(parse_lock(text, "x.lock"), "envbuild lock tiny --target lab") == text


def test_unknown_schema_and_damage():
    text = dump_lock(_lock(), "envbuild lock tiny --target lab")
    with pytest.raises(CheckFailed, match="unknown lock schema"):
        parse_lock(text.replace("envbuild.lock/1", "envbuild.lock/2"), "x.lock")
    with pytest.raises(InputError) as err:
        parse_lock(text.replace("verified: true", "verified: maybe", 1), "x.lock")
    assert err.value.where.startswith("x.lock:")  # points at the line
