"""opt-175b-azure-h100: the OPT-125M benchmark of opt-175b-azure at TP 2 on two H100s over the
node's own torch (CPU-side checks).

The real node's facts (tests/fixtures/nodes/h100-ubuntu2404-cuda13, one GPU; a second one of
the same model added where the benchmark's two GPUs matter) decide the plan; opt-175b-azure is
refused there and its check names this variant; every source change is a recipe patch that
applies once to the pinned text (excerpts in tests/data/opt_h100/).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sysconfig
import shlex
from pathlib import Path

import pytest

from envbuild.compat.check import preflight
from envbuild.facts.assemble import assemble
from envbuild.facts.profile import refine
from envbuild.facts.script import split_sections
from envbuild.lock.check import check_lock_file
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.node.textpatch import apply_text_patch
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.paths import DATA, FIXTURES

CAPTURE = FIXTURES / "nodes" / "h100-ubuntu2404-cuda13" / "facts-probe.txt"
EXCERPTS = DATA / "opt_h100"
RECIPE = "opt-175b-azure-h100"
PORT = "4de251ffca9a0717561f22bd721ee1ba7a8a5783"


def node(gpus: int = 1):
    target = load_target("h100-venv")
    facts = refine(target, assemble(split_sections(CAPTURE.read_text()), "h100-node"))
    if gpus > len(facts.gpus):  # the lent 2-GPU node: the capture's H100 twice
        facts = facts.model_copy(update={"gpus": [facts.gpus[0]] * gpus})
    return target, facts


def test_feasible_on_a_two_h100_node_and_the_lock_is_current():
    target, facts = node(gpus=2)
    recipe = load_recipe(RECIPE)
    verdict = preflight(recipe, target, facts)
    assert verdict.feasible, [v.message for v in verdict.violations]
    one = {v.rule for v in preflight(recipe, *node(gpus=1)).errors}
    assert one == {"too-few-gpus"}  # TP 2 needs both GPUs
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, target)
    assert {g.name: g.sha[:8] for g in lock.git} == {"metaseq": PORT[:8], "fairscale": "19155319"}


def test_an_install_without_its_benchmark_goes_ahead_on_one_gpu_and_says_why_the_benchmark_cannot():
    """Run 22: `provision --no-smoke` of this recipe on a lent 1 x H200 (to build metaseq's kernels
    once) was refused by too-few-gpus, a row about the benchmark's two ranks alone. Without the
    benchmark it is a warning; with it, still the refusal; the plan's preflight step says which."""
    from envbuild.plan.build import PlanOptions
    from envbuild.plan.resolve import check_facts, resolve

    recipe = load_recipe(RECIPE)
    target, facts = node(gpus=1)
    _, with_smoke = check_facts(recipe, target, facts)
    assert not with_smoke.feasible and {v.rule for v in with_smoke.errors} == {"too-few-gpus"}
    _, install_only = check_facts(recipe, target, facts, smoke=False)
    assert install_only.feasible and not install_only.errors
    (gpus,) = [v for v in install_only.violations if v.rule == "too-few-gpus"]
    assert gpus.severity == "warning" and "needs 2 GPU" in gpus.message and "--no-smoke" in gpus.message
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, target)
    for smoke in (True, False):
        plan = resolve(recipe, target, facts, lock, PlanOptions(prefix="/opt/envs/opt", smoke=smoke)).plan
        assert plan.preflight().params.feasible is (not smoke)
    # two GPUs: nothing to say either way
    assert check_facts(recipe, *node(gpus=2), smoke=False)[1].violations == check_facts(recipe, *node(gpus=2))[1].violations


def test_published_recipe_is_refused_on_the_h100_naming_this_variant():
    target, facts = node(gpus=2)
    published = preflight(load_recipe("opt-175b-azure"), target, facts)
    rows = {v.rule: v.message for v in published.errors}
    assert "sm_90" in rows["wheel-lacks-gpu-arch"]
    assert "nvcc-major-mismatch" in rows
    assert [v.recipe for v in published.variants] == [RECIPE] and published.variants[0].targets == ["h100-venv"]
    assert load_recipe(RECIPE).variant_of == "opt-175b-azure"


def test_metaseq_carries_the_megatron_port_and_the_published_commits():
    """The one metaseq source holds what fairseq_v3 and Apex gave (no separate source for
    either), at the port's commit, which the lock found to contain the guide's a1a4e733 and the
    fairseq_v3 switch 5ca60055 (requires_ancestors, checked against the mirror when locked)."""
    recipe = load_recipe(RECIPE)
    assert {s.name for s in recipe.sources} == {"metaseq", "fairscale"}
    metaseq = recipe.source("metaseq")
    assert metaseq.sha == PORT and metaseq.install == "editable"
    published = load_recipe("opt-175b-azure").source("metaseq")
    assert {published.sha, *published.requires_ancestors} <= set(metaseq.requires_ancestors)
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, load_target("h100-venv"))
    pin = lock.git_pin("metaseq")
    assert pin.verified and pin.sha == PORT
    # the kernels the port builds are what the import check asks of the installed tree
    assert {"amp_C", "fused_adam_cuda", "metaseq.modules.megatron.fused_kernels.scaled_masked_softmax_cuda"} \
        <= set(recipe.import_check)


def test_lock_holds_no_metaseq_install_requires_but_the_recipes_packages():
    recipe = load_recipe(RECIPE)
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, load_target("h100-venv"))
    assert recipe.source("metaseq").dependencies == "none"
    by_name = {p.name: p for p in lock.packages}
    # metaseq's install_requires (hydra-core<1.2, protobuf==3.20.2, tensorboard==2.8.0, sklearn...)
    for name in ("protobuf", "flask", "ipython", "sklearn", "scikit-learn", "pre-commit"):
        assert name not in by_name, name
    assert by_name["hydra-core"].version == "1.3.2" and by_name["omegaconf"].version == "2.3.0"
    assert by_name["torch"].source == "preinstalled" and by_name["tensorboard"].source == "preinstalled"


def test_sklearn_row_is_quiet_for_a_metaseq_installed_without_dependencies(tmp_path):
    target, facts = node(gpus=2)
    assert "metaseq-sklearn-brownout" not in {v.rule for v in preflight(load_recipe(RECIPE), target, facts).errors}
    text = (Path("envbuild/recipes/data") / f"{RECIPE}.yaml").read_text()
    with_deps = tmp_path / "with-deps.yaml"
    with_deps.write_text(text.replace("    dependencies: none\n    why: >-\n      4de251ff", "    why: >-\n      4de251ff", 1))
    assert load_recipe(str(with_deps)).source("metaseq").dependencies is None
    assert "metaseq-sklearn-brownout" in {v.rule for v in preflight(load_recipe(str(with_deps)), target, facts).errors}


PATCHED = {
    "dataclass-default-factory": "configs.py.txt",
    "hydra-init-default-factory": "initialize.py.txt",
    "omegaconf-primitive-type": "dataclass_utils.py.txt",
    "opt-125m-batch-2gpu": "opt_job_constants.py.txt",
    "fused-dense-scalar-type": "fused_dense.cpp.txt",
}
# the excerpt holds one of the pinned file's four dispatch sites (the patch's count is 4)
EXCERPT_COUNT = {"fused-dense-scalar-type": 1}


def _excerpt(name: str) -> str:
    return (EXCERPTS / name).read_text().split("\n", 2)[2]


def _patched(name: str) -> str:
    text = _excerpt(name)
    for p in load_recipe(RECIPE).patches:
        if PATCHED[p.id] == name:
            status, text = apply_text_patch(text, p.kind, p.old, p.new, EXCERPT_COUNT.get(p.id, p.count))
            assert status == "applied", (p.id, status)
    return text


def test_every_patch_has_an_excerpt():
    assert {p.id for p in load_recipe(RECIPE).patches} == set(PATCHED)


@pytest.mark.parametrize("patch_id", sorted(PATCHED))
def test_patches_apply_to_the_pinned_text_once(patch_id):
    p = next(x for x in load_recipe(RECIPE).patches if x.id == patch_id)
    text = _excerpt(PATCHED[patch_id])
    count = EXCERPT_COUNT.get(patch_id, p.count)
    status, after = apply_text_patch(text, p.kind, p.old, p.new, count)
    assert status == "applied" and after != text
    again, same = apply_text_patch(after, p.kind, p.old, p.new, count)
    assert again == "already-applied" and same == after
    if patch_id not in ("opt-125m-batch-2gpu", "omegaconf-primitive-type", "fused-dense-scalar-type"):  # whole statements
        compile(after, PATCHED[patch_id], "exec")
    if patch_id == "opt-125m-batch-2gpu":
        assert '"125m": Size(12, 768, 12, 64, int(0.125 * M), 6.0e-4, 2),' in after


def _config_module(body: str) -> dict:
    """MetaseqConfig's excerpt over stand-in sub-configs (plain dataclasses, as metaseq's are)."""
    subs = ["Common", "CommonEval", "DistributedTraining", "Dataset", "Optimization", "Checkpoint",
            "Generation", "EvalLM", "Reshard", "EMA"]
    head = "from dataclasses import dataclass, field, MISSING\n@dataclass\nclass MetaseqDataclass:\n    pass\n"
    head += "".join(f"@dataclass\nclass {s}Config:\n    n: int = 0\n" for s in subs)
    ns: dict = {}
    exec(compile(head + body, "configs.py", "exec"), ns)
    return ns


def _gxx_syntax(tmp_path, name: str, text: str) -> subprocess.CompletedProcess:
    torch = pytest.importorskip("torch")  # the torch tier's venv has the CPU wheel (.ci/venv)
    from torch.utils.cpp_extension import include_paths
    gxx = shutil.which("g++")
    assert gxx, "g++ is needed (build-essential, .ci/apt-packages.txt)"
    src = tmp_path / name
    src.write_text(text)
    flags = [f"-I{d}" for d in [*include_paths(), sysconfig.get_paths()["include"]]]
    assert torch.__version__ >= "2"
    return subprocess.run([gxx, "-std=c++17", "-fsyntax-only", *flags, str(src)], capture_output=True, text=True)


@pytest.mark.torch
def test_fused_dense_compiles_against_torch_headers_only_when_patched(tmp_path):
    """Deviation apex-dispatch-scalar-type, the C++ side: the pinned fused_dense.cpp (excerpt:
    its headers and first dispatching function) fails g++ against this torch's headers with the
    error the GPU node's install log shows, and compiles once patched. The .cu kernels cannot be
    compiled here (no nvcc): on the GPU node nvcc 13.0 built every .cu source up to fused_dense_cuda.cu;
    fused_adam_cuda_kernel.cu, after it in setup.py, was never reached (unproven until the GPU run)."""
    pinned = _gxx_syntax(tmp_path, "pinned.cpp", _excerpt("fused_dense.cpp.txt"))
    assert pinned.returncode != 0
    assert re.search(r"cannot convert .const at::DeprecatedTypeProperties. to .c10::ScalarType.", pinned.stderr), pinned.stderr
    patched = _gxx_syntax(tmp_path, "patched.cpp", _patched("fused_dense.cpp.txt"))
    assert patched.returncode == 0, patched.stderr


def test_patched_config_classes_build_on_this_python():
    """Unpatched, MetaseqConfig is refused by Python >= 3.11's dataclasses (what `import metaseq`
    raised on the node's 3.12); patched it builds, and hydra_init's patched loop stores an
    instance of each sub-config, as the old .default was."""
    with pytest.raises(ValueError, match="mutable default"):
        _config_module(_excerpt("configs.py.txt"))
    ns = _config_module(_patched("configs.py.txt"))
    config = ns["MetaseqConfig"]
    stored = {}
    init = _patched("initialize.py.txt")
    store = type("CS", (), {"store": lambda self, name, node: stored.__setitem__(name, node)})()
    scope = {"ConfigStore": type("C", (), {"instance": staticmethod(lambda: store)}), "MetaseqConfig": config,
             "logger": None}
    exec(compile(init, "initialize.py", "exec"), scope)
    scope["hydra_init"]()
    for f in dataclasses.fields(config):
        assert type(stored[f.name]).__name__ == f.type, f.name


def test_benchmark_runs_the_published_command_on_two_gpus_without_azure_variables():
    recipe = load_recipe(RECIPE)
    published = load_recipe("opt-175b-azure").benchmark
    bench = recipe.benchmark
    argv, base = shlex.split(bench.command), shlex.split(published.command)
    assert argv[0] == "opt-baselines" and argv[argv.index("--num-gpus") + 1] == "2"
    assert [a for a in argv if a != "2"] == [a for a in base if a != "8"]  # only the GPU count differs
    assert bench.needs_gpus == 2 and bench.threshold is None and bench.same_gpu_count
    assert not bench.target_env and published.target_env
    assert not set(published.target_env) & set(bench.env) and not set(published.target_env) & set(recipe.env)
    assert bench.parser == published.parser and bench.metric == published.metric
    assert "USER" in bench.env  # sweep.py reads $USER even with --checkpoints-dir


def test_patched_helper_swap_names_what_this_omegaconf_has():
    """The swapped name is the one omegaconf >= 2.2 has (the lock's 2.3.0); where omegaconf
    2.3.0 is importable, it has that name and not the pinned one."""
    from packaging.version import Version

    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", load_recipe(RECIPE), load_target("h100-venv"))
    locked = next(p.version for p in lock.packages if p.name == "omegaconf")
    assert Version(locked) >= Version("2.2")
    names = {n.split(".", 1)[1] for n in re.findall(r"_utils\.\w+", _patched("dataclass_utils.py.txt"))}
    assert names == {"is_primitive_type_annotation"}
    omegaconf = pytest.importorskip("omegaconf")
    if omegaconf.__version__ != locked:
        pytest.skip(f"omegaconf {omegaconf.__version__} here, not the lock's {locked}")
    from omegaconf import _utils

    assert hasattr(_utils, "is_primitive_type_annotation") and not hasattr(_utils, "is_primitive_type")


def test_the_venv_gets_a_setuptools_whose_develop_builds_in_place():
    """metaseq 4de251ff has no pyproject.toml, so pip's editable install runs `setup.py
    develop`; setuptools >= 80 turns that into an isolated `pip install -e` (offline: no index,
    no torch). The lock's build tooling holds a setuptools below 80 for the venv."""
    from packaging.version import Version

    recipe = load_recipe(RECIPE)
    assert recipe.environment.setuptools == "<80" and recipe.source("metaseq").install == "editable"
    for target in recipe.targets:
        lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / f"{target}.lock", recipe, load_target(target))
        tooling = {t.name: t.version for t in lock.tooling}
        assert Version(tooling["setuptools"]) < Version("80") and "wheel" in tooling


def test_a_bundle_for_installs_without_the_benchmark_is_planned_on_one_gpu(tmp_path, capsys):
    """Run 23: the bundle that carried metaseq's build/ to a fresh 1 x H200 was planned from the first
    node's facts (the key names its torch, CUDA and archs). `envbuild bundle --facts` refused them for
    the benchmark's two ranks; `--no-smoke` plans the nodes as `provision --no-smoke` does. With
    the benchmark the refusal stands, and its hint names the option."""
    import json

    from envbuild.bundle.pack import node_plans
    from envbuild.cli import main
    from envbuild.errors import CheckFailed

    recipe = load_recipe(RECIPE)
    target, facts = node(gpus=1)
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, target)
    with pytest.raises(CheckFailed, match="too-few-gpus") as refused:
        node_plans(recipe, target, [facts], lock, None)
    assert "--no-smoke" in (refused.value.hint or "")
    (plan,) = node_plans(recipe, target, [facts], lock, None, smoke=False)
    assert plan.preflight().params.feasible and "smoke" not in {s.id for s in plan.steps}
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts.model_dump(mode="json", by_alias=True)))
    out = tmp_path / "b.tar"
    args = ["bundle", RECIPE, "--target", "h100-venv", "--facts", str(facts_file), "-o", str(out)]
    assert main(args) == 1 and not out.exists()
    assert "too-few-gpus" in capsys.readouterr().err
    # --no-smoke goes past the planning to the packing, here stopped by the git mirror it lacks
    # (its locked wheels from PyPI or the download cache, as any bundle's)
    empty = tmp_path / "mirror"
    empty.mkdir()
    assert main([*args, "--no-smoke", "--git-mirror", str(empty)]) == 3 and not out.exists()
    err = capsys.readouterr().err
    assert "no git mirror of https://github.com/facebookresearch/metaseq" in err and "too-few-gpus" not in err
