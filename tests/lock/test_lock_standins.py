"""The CPU stand-ins a lock records (envbuild.lock.standins) and the parser that finds a stand-in's
wheel on a PEP 503 page: pure functions, on the shipped table and the shipped locks."""

from __future__ import annotations

from envbuild.lock import lock_path, read_lock
from envbuild.lock.indexes import linux_cp_wheel
from envbuild.lock.standins import STAND_INS, row_for, stand_in

SHA = "e7ad1649adb7dc2a450e70a3e51240b84fa4746c69c8f98989ce0c254f9fba3a"
PAGE = (f'<a href="https://files.example/torch-1.8.1-cp38-cp38-win_amd64.whl#sha256={"0" * 64}">w</a>\n'
        f'<a href="https://files.example/torch-1.8.1-cp39-cp39-manylinux1_x86_64.whl#sha256={"1" * 64}">x</a>\n'
        f'<a href="https://files.example/torch-1.8.1-cp38-cp38-manylinux1_x86_64.whl#sha256={SHA}">y</a>\n'
        f'<a href="https://files.example/torch-1.8.1-cp38-none-macosx_10_9_x86_64.whl#sha256={"2" * 64}">z</a>\n')


def test_the_linux_wheel_of_the_python_is_found_with_its_hash():
    assert linux_cp_wheel(PAGE, "1.8.1", "3.8", "x86_64") == (
        "torch-1.8.1-cp38-cp38-manylinux1_x86_64.whl",
        "https://files.example/torch-1.8.1-cp38-cp38-manylinux1_x86_64.whl", SHA)
    assert linux_cp_wheel(PAGE, "1.8.1", "3.10", "x86_64") is None
    assert linux_cp_wheel(PAGE, "1.8.1", "3.8", "aarch64") is None


def test_a_row_wins_over_the_same_version_and_nothing_is_invented():
    asked = []

    def on_pypi(name, version):
        asked.append((name, version))
        return version == "2.0.1"

    assert stand_in("torch", "1.8.2", on_pypi).version == "1.8.1"  # the row: another patch version
    assert asked == []
    same = stand_in("torch", "2.0.1", on_pypi)
    assert same.version == "2.0.1" and same.source == "https://pypi.org/project/torch/2.0.1/"
    assert stand_in("torch", "2.0.2", on_pypi).version is None  # PyPI lacks it, no row
    assert stand_in("numpy", "*", lambda n, v: True).version == "1.22.2"  # only a row answers "*"
    assert stand_in("tqdm", "*", lambda n, v: True).version is None
    assert row_for("apex", "0.1").version is None and row_for("apex", None) is None


def test_every_row_says_why_and_cites_a_page():
    for row in STAND_INS:
        assert row.why and row.source.startswith("https://"), row


def test_shipped_locks_record_the_stand_in_of_every_package_they_do_not_install():
    for recipe, target in [("alpa-megatron", "local"), ("megatron-deepspeed-slurm", "slurm"),
                           ("megatronapp", "rtx4090-pod"), ("polaris-megatron-deepspeed", "polaris"),
                           ("h100-megatron-deepspeed", "h100-venv")]:
        lock = read_lock(lock_path(recipe, target))
        for entry in lock.packages:
            if entry.source == "preinstalled" or not entry.verified:
                assert entry.stand_in is not None, f"{recipe}/{target}: {entry.name}"
    torch = read_lock(lock_path("alpa-megatron", "local")).package("torch")
    assert torch.stand_in.version == "1.8.1" and torch.stand_in.dist.sha256 == SHA
