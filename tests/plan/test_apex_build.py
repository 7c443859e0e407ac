"""Apex build parameters: arch list, jobs for small and big nodes, install command per era and
pip, option table checks, wheel cache key."""

from __future__ import annotations

import pytest

from envbuild.errors import CheckFailed, InputError
from envbuild.patches.apex_build import arch_list, build_jobs, cache_key, install_command
from envbuild.patches.apex_options import OPTIONS, validate_options


def test_arch_list_sorted_deduplicated_and_normalized():
    assert arch_list(["9.0", "8.0", "sm_80", "86"]) == "8.0;8.6;9.0"
    assert arch_list([(8, 0)], ptx=True) == "8.0+PTX"
    assert arch_list(["8.0", "9.0"], ptx=True) == "8.0;9.0+PTX"


def test_arch_list_checks_the_toolkit():
    assert arch_list(["9.0"], nvcc="11.8") == "9.0"
    with pytest.raises(CheckFailed, match="needs CUDA 11.8"):
        arch_list(["8.0", "9.0"], nvcc="11.3")


@pytest.mark.parametrize("bad", [[], ["hopper"]])
def test_arch_list_bad_input(bad):
    with pytest.raises(InputError):
        arch_list(bad)


def test_build_jobs_small_node_is_serial():
    jobs, threads, reason = build_jobs(4, 8, True)
    assert (jobs, threads) == (1, 1)
    assert "OOM" in reason


def test_build_jobs_big_node_parallel_within_memory():
    b = build_jobs(96, 1800, True, archs=4)
    assert b.nvcc_threads == 4 and b.concurrent <= 96
    small = build_jobs(16, 64, True, archs=4)
    for x in (b, small):  # never plan more concurrent nvcc than memory minus headroom allows
        mem = 1800 if x is b else 64
        assert x.concurrent * 3.0 <= mem - max(4, 0.15 * mem)
    assert small.concurrent < b.concurrent
    assert b.env() == {"MAX_JOBS": str(b.max_jobs), "NVCC_APPEND_FLAGS": "--threads 4"}


def test_nvcc_threads_only_help_with_several_archs():
    # nvcc --threads splits work across -gencode targets: with one arch it does nothing
    # (seen on the H100 build, bench/results/h100-apex-build.json).
    one = build_jobs(16, 125, True, nvcc="13.0", archs=1)
    assert one.nvcc_threads == 1 and "NVCC_APPEND_FLAGS" not in one.env()
    assert build_jobs(16, 125, True, nvcc="13.0", archs=2).nvcc_threads == 2


def test_extension_parallelism_spreads_slots_over_extensions():
    # Apex >= 2025-02-25 builds several extensions at once; each has only a few sources.
    b = build_jobs(16, 125, True, nvcc="13.0", archs=1, parallel_ext=True)
    assert b.parallel > 1 and b.max_jobs <= 4 and b.concurrent <= 16
    serial = build_jobs(16, 125, True, nvcc="13.0", archs=1, parallel_ext=False)
    assert serial.parallel == 1 and serial.max_jobs == 16


def test_build_jobs_old_nvcc_has_no_threads_and_cpp_only_is_lighter():
    assert build_jobs(96, 1800, True, nvcc="11.1").nvcc_threads == 1
    assert build_jobs(16, 64, False).max_jobs == 16
    with pytest.raises(InputError):
        build_jobs(0, 64, True)


def test_install_pre_pyproject_old_pip_uses_global_option():
    argv, env, reason = install_command(apex_date="2021-02-23", pip_version="22.3.1",
                                        options=["--cpp_ext", "--cuda_ext", "--fast_layer_norm"])
    assert argv[:4] == ["python", "-m", "pip", "install"]
    assert "--global-option=--cpp_ext" in argv and "--global-option=--fast_layer_norm" in argv
    assert "--no-build-isolation" not in argv and env == {}


def test_install_pre_pyproject_new_pip_builds_a_wheel_with_setup_py():
    cmd = install_command(apex_date="2022-05-31", pip_version="24.0", options=["--cpp_ext", "--cuda_ext"],
                          src="/src/apex")
    assert cmd.argv == ["python", "setup.py", "--cpp_ext", "--cuda_ext", "bdist_wheel", "-d", "dist"]
    assert cmd.cwd == "/src/apex" and "23.1" in cmd.reason


def test_install_pyproject_era_by_pip_version():
    new = install_command(apex_date="2023-09-06", pip_version="23.3", options=["--cpp_ext", "--cuda_ext"])
    assert "--no-build-isolation" in new.argv
    assert "--config-settings=--build-option=--cuda_ext" in new.argv
    old = install_command(has_pyproject=True, pip_version="23.0.1", options=["--cpp_ext"])
    assert "--no-build-isolation" in old.argv and "--global-option=--cpp_ext" in old.argv


def test_install_env_var_era():
    argv, env, reason = install_command(apex_date="2026-07-08", pip_version="25.2",
                                        options=["--cpp_ext", "--cuda_ext", "--parallel", "8"])
    assert env == {"APEX_CPP_EXT": "1", "APEX_CUDA_EXT": "1", "APEX_PARALLEL_BUILD": "8"}
    assert "--no-build-isolation" in argv and not any(a.startswith("--global") for a in argv)


def test_install_wheel_dir_for_the_cache():
    cmd = install_command(apex_date="2023-09-06", pip_version="24.0", options=["--cpp_ext"], wheel_dir="/w")
    assert cmd.argv[:7] == ["python", "-m", "pip", "wheel", "--no-deps", "-w", "/w"]


def test_options_removed_or_not_yet_present_are_refused_with_fix():
    with pytest.raises(CheckFailed) as exc:
        install_command(apex_date="2026-07-08", pip_version="25.2", options=["--cuda_ext", "--fast_multihead_attn"])
    assert "526871a2" in str(exc.value) and "before 2026-07-08" in exc.value.hint
    with pytest.raises(CheckFailed, match="--parallel appeared on 2025-02-25"):
        validate_options(["--parallel", "4"], "2022-05-31")
    assert validate_options(["--fast_multihead_attn"], "2022-05-31")


def test_unknown_or_malformed_options_are_input_errors():
    with pytest.raises(InputError, match="unknown Apex build option"):
        install_command(apex_date="2022-05-31", pip_version="22.0", options=["--turbo"])
    with pytest.raises(InputError, match="needs a number"):
        validate_options(["--parallel"], None)
    with pytest.raises(InputError):
        install_command(pip_version="22.0", options=["--cpp_ext"])  # no era at all


def test_option_table_rows_are_consistent():
    flags = [r.flag for r in OPTIONS]
    assert len(flags) == len(set(flags))
    for r in OPTIONS:
        assert r.added_in and (r.removed is None or r.removed > r.added)


def test_cache_key_is_stable_and_sensitive():
    base = dict(apex_sha="265b451de8ba9bfcb67edc7360f3d8772d0a8bea", patch_digest="ab" * 32,
                torch_version="1.10.1+cu113", torch_cuda="11.3", nvcc="11.4", arch_list="8.0;8.6",
                options=["--cpp_ext", "--cuda_ext"])
    k = cache_key(**base)
    assert k == cache_key(**base) and k.startswith("apex-265b451de8ba-")
    assert k == cache_key(**{**base, "options": ["--cuda_ext", "--cpp_ext"]})
    for field, value in [("nvcc", "11.3"), ("patch_digest", ""), ("arch_list", "8.0"),
                         ("torch_version", "1.10.0+cu113"), ("options", ["--cpp_ext"])]:
        assert cache_key(**{**base, field: value}) != k, field
    with pytest.raises(InputError):
        cache_key(**{**base, "apex_sha": "master"})
