"""One case per compatibility row: the baseline passes every row; each case changes one thing
of the baseline (recipe or node facts) and the row must fire with the concrete values."""

from __future__ import annotations

import copy

import pytest
import yaml

from envbuild.compat.check import preflight
from envbuild.compat.rules import RULES, rule
from envbuild.facts.model import Gpu, Interpreter
from envbuild.facts.profile import from_target
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target
from support import paths

DATA = paths.DATA / "compat"
BASE_RECIPE = yaml.safe_load((DATA / "baseline-recipe.yaml").read_text())
BASE_TARGET = yaml.safe_load((DATA / "a100-node.yaml").read_text())

H100 = [Gpu(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0")]
RTX4090 = [Gpu(index=0, name="NVIDIA GeForce RTX 4090", compute_capability="8.9")]
LTS = "https://download.pytorch.org/whl/lts/1.8/torch_lts.html"
B31E129 = "b31e1296354e979722627a6c4dedafe19b51fa97"
A1A4E733 = "a1a4e733d27898056fe08fb8f6a1fa6af06ca55a"


def torch(version: str, tag: str, index: str | None = "auto") -> dict:
    if index == "auto":
        index = f"https://download.pytorch.org/whl/{tag}/torch_stable.html"
    return {"name": "torch", "version": version, "cuda": tag, "index": index,
            "index_kind": "find-links" if index else "pypi", "why": "test"}


def make(recipe: dict | None = None, *, torch_pkg: dict | None = None, apex: dict | None = None,
         no_apex: bool = False, sources: list[dict] = (), patches: list[dict] = (),
         env: dict | None = None, target: dict | None = None, **facts):
    """(recipe, target, facts) = baseline with the given changes."""
    r = copy.deepcopy(BASE_RECIPE)
    for k, v in (recipe or {}).items():
        if isinstance(v, dict) and isinstance(r.get(k), dict):
            r[k].update(v)
        else:
            r[k] = v
    if torch_pkg is not None:
        r["packages"] = [torch_pkg] + [p for p in r["packages"] if p["name"] != "torch"]
    if no_apex:
        r["sources"] = []
    elif apex:
        r["sources"][0].update(apex)
    r["sources"] += list(sources)
    r["patches"] = list(patches)
    if env:
        r.setdefault("environment", {}).update(env)
    t = copy.deepcopy(BASE_TARGET)
    t.update(target or {})
    tgt = Target.model_validate(t)
    return Recipe.model_validate(r), tgt, from_target(tgt).model_copy(update=facts)


APEX_PATCH = {"id": "relax-apex-check", "kind": "apex-cuda-check", "component": "apex", "why": "test"}
OLD_TORCH = dict(env={"setuptools": "==59.5.0"})
PY39 = dict(pythons=[Interpreter(path="/usr/bin/python3.9", version="3.9.18")])
PY38 = dict(pythons=[Interpreter(path="/usr/bin/python3.8", version="3.8.10")])

# rule id -> (context, substrings the message must contain, other rows allowed to fire)
CASES = {
    "torch-python-no-wheel": (make({"python": "3.12"}, pythons=[Interpreter(path="/p", version="3.12.3")]),
                              ["2.0.1+cu118", "Python 3.12", "cp311"], set()),
    "torch-variant-unpublished": (make({"python": "3.9"}, torch_pkg=torch("1.10.0", "cu116"), no_apex=True,
                                       **OLD_TORCH, **PY39), ["1.10.0+cu116", "cu113"], set()),
    "torch-not-on-pypi": (make({"python": "3.8"}, torch_pkg=torch("1.8.2", "cu111", index=None), no_apex=True,
                               **OLD_TORCH, **PY38), ["1.8.2 is not on PyPI", LTS], set()),
    "torch-version-unknown": (make(torch_pkg=torch("2.5.1", "cu118")), ["2.5.1"], set()),
    "wheel-lacks-gpu-arch": (make({"python": "3.8"}, torch_pkg=torch("1.8.2", "cu111", index=LTS), no_apex=True,
                                  gpus=H100, **OLD_TORCH, **PY38),
                             ["sm_90", "cu111", "CUDA 11.1", "needs CUDA >= 11.8", "NVIDIA H100"], set()),
    "driver-too-old": (make(torch_pkg=torch("2.1.0", "cu121"), no_apex=True, driver_version="470.82.01",
                            driver_cuda="11.4"), ["CUDA 12.1", "470.82.01", "up to CUDA 11.4"], set()),
    "driver-minor-compat": (make(driver_version="470.82.01", driver_cuda="11.4"),
                            ["2.0.1+cu118", "470.82.01", "minor-version compatibility"], set()),

    "nvcc-missing": (make(nvcc=None), ["no nvcc", "apex is built with --cuda_ext"], set()),
    "cuda-ext-with-cpu-torch": (make(torch_pkg=torch("2.0.1", "cpu")), ["2.0.1+cpu", "CPU build", "--cuda_ext"],
                                set()),
    "nvcc-too-old-for-gpu": (make(patches=[APEX_PATCH], gpus=H100, nvcc="11.7"),
                             ["nvcc 11.7 cannot compile for sm_90", "11.8"], {"nvcc-minor-mismatch"}),
    "nvcc-major-mismatch": (make(nvcc="12.1"), ["nvcc 12.1", "CUDA 11.8", "major versions differ"], set()),
    "nvcc-minor-mismatch": (make(torch_pkg=torch("2.0.1", "cu117"), patches=[APEX_PATCH]),
                            ["nvcc 11.8", "CUDA 11.7", "same major 11", "relax-apex-check"], set()),
    "apex-check-unpatched": (make(torch_pkg=torch("2.0.1", "cu117")),
                             ["RuntimeError", "nvcc 11.8", "CUDA 11.7"], set()),
    "apex-sed-noop": (make({"python": "3.9"}, torch_pkg=torch("1.10.1", "cu113"),
                           apex={"sha": "e2083df5eb96643c61613b9df48dd4eea6b07690"},
                           env={"setuptools": "==59.5.0", "pip": "<23.1"},
                           patches=[{"id": "azure-sed", "kind": "replace", "component": "apex",
                                     "old": "check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)", "new": "",
                                     "why": "Azure doc"}], nvcc="11.3", **PY39),
                     ["azure-sed", "e2083df5", "matches nothing"], set()),
    "apex-needs-torch-library": (make(apex={"sha": None, "unverified": "unpinned master"}),
                                 ["torch.library.custom_op", "2.0.1", "apex master"], set()),
    "apex-torch-six": (make(apex={"sha": "265b451de8ba9bfcb67edc7360f3d8772d0a8bea"}, env={"pip": "<23.1"}),
                       ["265b451d", "torch._six", "2.0.1"], set()),
    "apex-too-new-for-torch": (make({"python": "3.8"}, torch_pkg=torch("1.8.2", "cu111", index=LTS),
                                    nvcc="11.1", **OLD_TORCH, **PY38), ["52e18c89", "1.8.2"], set()),
    "apex-commit-unknown": (make(apex={"sha": "0123456789abcdef0123456789abcdef01234567"}),
                            ["01234567", "date unknown"], set()),
    "apex-pip-option-syntax": (make(torch_pkg=torch("1.13.1", "cu117"),
                                    apex={"sha": "265b451de8ba9bfcb67edc7360f3d8772d0a8bea"}, nvcc="11.7"),
                               ["265b451d", "23.1", "setup.py --cpp_ext --cuda_ext bdist_wheel"], set()),
    "apex-fast-mha-removed": (make(torch_pkg=torch("2.11.0", "cu130"),
                                   apex={"sha": "6424da3b4faa6c8f062da4a48c424fff3f02d42d",
                                         "build_options": ["--cpp_ext", "--cuda_ext", "--fast_multihead_attn"]},
                                   nvcc="13.0", driver_version="580.65.06", driver_cuda="13.0"),
                              ["6424da3b", "--fast_multihead_attn"], set()),
    "apex-fast-mha-git": (make(apex={"build_options": ["--cpp_ext", "--cuda_ext", "--fast_multihead_attn"]},
                               gpus=H100), ["apex/contrib/csrc/multihead_attn/cutlass", "checks it out with Apex",
                                             "sm_90"], set()),
    "apex-cuda13-sm70": (make(torch_pkg=torch("2.11.0", "cu130"), nvcc="13.0", driver_version="580.65.06",
                              driver_cuda="13.0"), ["52e18c89", "sm_70", "nvcc 13.0"], set()),
    "deepspeed-elastic-agent-torch24": (make({"packages": BASE_RECIPE["packages"] + [
        {"name": "deepspeed", "version": "0.10.3", "why": "t"}]}, torch_pkg=torch("2.11.0", "cu130"), no_apex=True,
        nvcc="13.0", driver_version="580.65.06", driver_cuda="13.0"),
        ["deepspeed 0.10.3", "_get_socket_with_port", "2.11.0"], set()),
    "megatron-fused-kernels-arch": (make(sources=[{"name": "megatron", "url": "https://github.com/NVIDIA/Megatron-LM",
                                                   "ref": "main", "sha": B31E129, "install": "pth", "why": "t"}],
                                         gpus=H100), ["megatron", "sm_70/sm_80", "sm_90", "NVIDIA H100"], set()),
    "megatron-no-setup-py": (make(sources=[{"name": "megatron", "url": "https://github.com/NVIDIA/Megatron-LM",
                                            "ref": "main", "sha": B31E129, "install": "editable", "why": "t"}]),
                             ["megatron", "editable", "6c00f448"], set()),
    "metaseq-megatron-branch": (make(sources=[
        {"name": "metaseq", "url": "https://github.com/facebookresearch/metaseq", "ref": "main", "sha": A1A4E733,
         "install": "none", "why": "t"},
        {"name": "megatron", "url": "https://github.com/ngoyal2707/Megatron-LM", "ref": "fairseq_v3",
         "sha": "fa6c0860b62e4ed2ac13a513e7d950d72f576a44", "install": "none", "why": "t"}]),
        ["a1a4e733", "fairseq_v3"], set()),
    "metaseq-sklearn-brownout": (make(sources=[{"name": "metaseq", "url": "https://github.com/facebookresearch/metaseq",
                                                "ref": "main", "sha": A1A4E733, "install": "editable", "why": "t"}]),
                                 ["SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL", "metaseq"], set()),
    "pypi-name-collision": (make({"packages": BASE_RECIPE["packages"] + [{"name": "apex", "version": "0.9.10",
                                                                          "why": "t"}]}), ["apex", "Pyramid"], set()),
    "torch-jit-arch-list": (make(torch_pkg=torch("1.13.1", "cu117"), patches=[APEX_PATCH], gpus=RTX4090),
                            ["1.13.1", "sm_89"], {"nvcc-minor-mismatch"}),
    "setuptools-old-torch": (make({"python": "3.9"}, torch_pkg=torch("1.10.1", "cu113"), no_apex=True, **PY39),
                             ["1.10.1", "59.5.0"], set()),
    "fairscale-version-string-compare": (
        make({"packages": BASE_RECIPE["packages"] + [{"name": "fairscale", "version": "0.10.0", "why": "t"}]},
             sources=[{"name": "metaseq", "url": "https://github.com/facebookresearch/metaseq", "ref": "main",
                       "sha": "5ca6005552b7a049f071754393d5b86185e0db6a", "why": "t"}]),
        ["'0.10.0'", "package fairscale==0.10.0", "< '0.4.0' is True as strings but False as versions"], set()),
    "fairscale-version-unknown": (
        make(sources=[{"name": "metaseq", "url": "https://github.com/facebookresearch/metaseq", "ref": "main",
                       "sha": "5ca6005552b7a049f071754393d5b86185e0db6a", "why": "t"},
                      {"name": "fairscale", "url": "https://github.com/facebookresearch/fairscale", "ref": "main",
                       "sha": "f" * 40, "install": "wheel", "why": "t"}]),
        ["fairscale declares at ffffffffffff is unknown", "fairscale_versions.yaml",
         "python -m envbuild.compat.fairscale_facts RECIPE --git-mirror DIR", "ENVBUILD_GIT_MIRROR"], set()),
    "numpy2-torch1": (make({"packages": [torch("1.13.1", "cu117"), {"name": "numpy", "version": ">=1.21", "why": "t"}]},
                           nvcc="11.7"), ["1.13.1", ">=1.21", "NumPy 2"], set()),
    "python-absent": (make(pythons=[], conda=[]), ["Python 3.10", "a100-node", "conda"], set()),
    "conda-module-absent": (make(env={"kind": "module-venv", "conda_module": "conda/2023-10-04"}),
                            ["conda/2023-10-04"], set()),
    "glibc-too-old": (make(glibc="2.12"), ["glibc >= 2.17", "2.12"], set()),
    "rdma-needs-infiniband": (make({"system_packages": ["libibverbs-dev"]}), ["libibverbs-dev", "InfiniBand"], set()),
    "container-runtime-missing": (make(env={"kind": "container", "base_image": "nvcr.io/nvidia/pytorch:23.04-py3"}),
                                  ["nvcr.io/nvidia/pytorch:23.04-py3", "no container runtime"], set()),
    "scheduler-mismatch": (make({"launcher": "pbs"}), ["pbs", "a100-node", "none"], set()),
    "too-few-gpus": (make({"benchmark": {"needs_gpus": 2}}), ["needs 2 GPU", "has 1"], set()),
    "resources-exceed-node": (make({"resources": [{
        "experiment": "benchmark", "gpus": 1, "gpu_memory_gib": 1000, "host_memory_gib": 100000, "disk_gib": 1,
        "network": "none", "minutes": 1, "basis": "estimate", "source": "a test's figures"}]}),
        ["benchmark: 1000 GiB per GPU expected", "100000 GiB of host memory expected", "a100-node",
         "(estimate: a test's figures)"], set()),
    "recipe-undecided": (make({"undecided": [{"field": "python", "why": "no version stated"},
                                             {"field": "benchmark", "why": "README.md:40 launch, parser unknown"}]}),
                         ["2 field(s) undecided", "python (no version stated)", "benchmark (README.md:40"], set()),
}


def test_baseline_passes_every_row():
    v = preflight(*make())
    assert v.feasible and v.violations == []
    assert v.passed == [r.id for r in RULES]


def test_every_row_has_a_case():
    assert set(CASES) == {r.id for r in RULES}


@pytest.mark.parametrize("rule_id", list(CASES))
def test_row_fires_with_concrete_values(rule_id):
    ctx, needles, also = CASES[rule_id]
    v = preflight(*ctx)
    fired = {x.rule: x for x in v.violations}
    assert rule_id in fired, f"{rule_id} did not fire; fired: {sorted(fired)}"
    msg = fired[rule_id].message
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    assert set(fired) - {rule_id} <= also, f"unexpected rows fired: {sorted(set(fired) - {rule_id} - also)}"
    assert v.feasible == (rule(rule_id).severity == "warning" and all(
        fired[o].severity == "warning" for o in set(fired) - {rule_id}))


def test_fairscale_of_the_opt_recipe_compares_right():
    """The pinned fairscale (19155319 declares 0.4.6 in fairscale/version.py) passes metaseq's
    text comparisons; a commit the facts do not know is not judged, and says so (a warning)."""
    from envbuild.compat.context import Context
    from envbuild.compat.rules_source import _fairscale_string_version, _fairscale_unknown, fairscale_version
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    ctx = Context(recipe=rec, target=tgt, facts=from_target(tgt))
    assert fairscale_version(ctx) == ("0.4.6", "fairscale @ 19155319 (fairscale/version.py)")
    assert _fairscale_string_version(ctx) is None and _fairscale_unknown(ctx) is None
    other = rec.model_copy(update={"sources": [s.model_copy(update={"sha": "f" * 40}) if s.name == "fairscale"
                                               else s for s in rec.sources]})
    ctx = Context(recipe=other, target=tgt, facts=from_target(tgt))
    assert _fairscale_string_version(ctx) is None
    assert "fairscale declares at ffffffffffff is unknown" in _fairscale_unknown(ctx)
    v = preflight(other, tgt, from_target(tgt))
    assert "fairscale-version-unknown" in {x.rule for x in v.warnings}
    assert "fairscale-version-string-compare" in v.passed


def test_fairscale_versions_are_the_facts_read_from_the_tree():
    """Each commit's version comes from the committed facts, which name the file it was read
    from; 88200493 predates fairscale/version.py."""
    from envbuild.compat.rules_source import FAIRSCALE_FACTS

    got = {sha[:8]: (row.version, row.path) for sha, row in FAIRSCALE_FACTS.items()}
    assert got == {"19155319": ("0.4.6", "fairscale/version.py"), "91132c7e": ("0.4.6", "fairscale/version.py"),
                   "1bc96fa8": ("0.4.6", "fairscale/version.py"), "88200493": ("0.4.1", "fairscale/__init__.py")}


def test_torch_not_on_pypi_names_the_pypi_default_for_local_versions():
    v = preflight(*make({"python": "3.9"}, torch_pkg=torch("1.10.1", "cu113", index=None), no_apex=True,
                        **OLD_TORCH, **PY39))
    msg = next(x.message for x in v.violations if x.rule == "torch-not-on-pypi")
    assert "1.10.1+cu113 is not on PyPI" in msg and "cu102" in msg


def test_megatron_fused_kernels_pass_when_gencode_is_patched():
    meg = {"name": "megatron", "url": "https://github.com/NVIDIA/Megatron-LM", "ref": "main", "sha": B31E129,
           "install": "pth", "why": "t"}
    patch = {"id": "gencode", "kind": "replace", "component": "megatron", "file": "megatron/fused_kernels/__init__.py",
             "old": "sm_80", "new": "sm_90", "why": "t"}
    v = preflight(*make(sources=[meg], patches=[patch], gpus=H100))
    assert "megatron-fused-kernels-arch" in v.passed


def test_megatron_fused_kernels_run_on_same_major_ampere():
    meg = {"name": "megatron", "url": "https://github.com/zhisbug/Megatron-LM", "ref": "alpa-osdi22-benchmark",
           "sha": "c28bbd208d16ffea61fa3c545e66b3a9d87f9d84", "install": "pth", "why": "t"}
    gpus = [Gpu(index=0, name="NVIDIA GeForce RTX 3090", compute_capability="8.6")]
    assert preflight(*make(sources=[meg], gpus=gpus)).feasible


def test_python_created_by_conda_passes():
    v = preflight(*make(pythons=[], conda=["/opt/conda/bin/conda"]))
    assert "python-absent" in v.passed


def test_metaseq_sklearn_env_set_passes():
    ms = {"name": "metaseq", "url": "https://github.com/facebookresearch/metaseq", "ref": "main", "sha": A1A4E733,
          "install": "editable", "why": "t",
          "env": {"SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL": "True"}}
    assert "metaseq-sklearn-brownout" in preflight(*make(sources=[ms])).passed


def test_every_violated_row_is_reported_at_once():
    # torch 1.8.2+cu111 from PyPI, Python 3.11, on an H100 with nvcc 13: several rows at once.
    v = preflight(*make({"python": "3.11"}, torch_pkg=torch("1.8.2", "cu111", index=None), gpus=H100, nvcc="13.0",
                        driver_version="580.159.04", driver_cuda="13.0",
                        pythons=[Interpreter(path="/p", version="3.11.7")]))
    errors = {x.rule for x in v.errors}
    assert {"torch-python-no-wheel", "torch-not-on-pypi", "wheel-lacks-gpu-arch", "nvcc-major-mismatch",
            "apex-too-new-for-torch"} <= errors
    assert not v.feasible


def test_driver_version_unknown_uses_the_minimum_for_its_cuda():
    # driver_cuda 11.4 and no version: a cu118 torch runs by minor-version compatibility (warning)
    v = preflight(*make(driver_version=None, driver_cuda="11.4"))
    assert v.feasible and "driver-minor-compat" in {x.rule for x in v.warnings}
    msg = next(x.message for x in v.warnings if x.rule == "driver-minor-compat")
    assert "version unknown" in msg and "11.4" in msg
    # across majors it stays an error
    v = preflight(*make(torch_pkg=torch("2.1.0", "cu121"), no_apex=True, driver_version=None, driver_cuda="11.4"))
    assert "driver-too-old" in {x.rule for x in v.errors}


def test_pip_syntax_new_apex_with_old_pip_names_the_plan_choice():
    v = preflight(*make(env={"pip": "<23.1"}))
    msg = next(x.message for x in v.warnings if x.rule == "apex-pip-option-syntax")
    assert "52e18c89" in msg and "<23.1" in msg and "--global-option" in msg


def test_metaseq_fairseq_branch_is_decided_by_the_commits_history():
    """metaseq-megatron-branch reads the metaseq source's requires_ancestors (which the lock
    checks against the mirror), not a list of SHAs: the shipped pin (5ca60055, listing itself)
    passes; an older metaseq commit other than the guide's a1a4e733 with fairseq_v3 fails, and so
    does a metaseq containing the switch with fairseq_v2."""
    from envbuild.compat.context import Context
    from envbuild.compat.rules_source import _metaseq_megatron
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    facts = from_target(tgt)

    def judged(**metaseq) -> str | None:
        other = rec.model_copy(update={"sources": [s.model_copy(update=metaseq) if s.name == "metaseq" else s
                                                   for s in rec.sources]})
        return _metaseq_megatron(Context(recipe=other, target=tgt, facts=facts))

    assert judged() is None
    # 2022-06 metaseq, before the switch: nothing shows it contains 5ca60055
    older = judged(sha="e" * 40, requires_ancestors=[])
    assert older is not None and "not shown to contain 5ca60055" in older and "fairseq_v3" in older
    fairseq_v2 = rec.model_copy(update={"sources": [s.model_copy(update={"ref": "fairseq_v2", "sha": "d" * 40})
                                                    if s.name == "megatron" else s for s in rec.sources]})
    msg = _metaseq_megatron(Context(recipe=fairseq_v2, target=tgt, facts=facts))
    assert msg is not None and "contains 5ca60055" in msg and "fairseq_v2" in msg
    # the shipped locks recorded the ancestry the rule relies on, checked against the mirror
    from envbuild.lock import lock_path
    from envbuild.lock.serialize import read_lock

    for target in ("azure-nd96", "local"):
        pin = read_lock(lock_path("opt-175b-azure", target)).git_pin("metaseq")
        assert "5ca6005552b7a049f071754393d5b86185e0db6a" in pin.ancestors_checked and pin.verified
