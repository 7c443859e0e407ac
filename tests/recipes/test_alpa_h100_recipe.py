"""alpa-megatron-h100: Alpa's Megatron baseline over the H100 node's own torch (CPU-side checks).

The real node's facts (tests/fixtures/nodes/h100-ubuntu2404-cuda13) decide the plan; the
published pins (torch 1.8.2+cu111, Apex e2083df5) are refused there with the rows that say why
and `check` of alpa-megatron names this variant; every source change is a recipe patch that
applies once to the pinned text (excerpts in tests/data/alpa_h100/); the H100 run's own output
(docs/results/alpa-megatron/) is read by `envbuild parse`.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path

import pytest

from envbuild.compat.check import preflight
from envbuild.lock.check import check_lock_file
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.recipes import load_recipe
from support.h100 import h100_node
from support.paths import DATA, ROOT

EXCERPTS = DATA / "alpa_h100"
RESULTS = ROOT / "docs" / "results" / "alpa-megatron"
RECIPE = "alpa-megatron-h100"



def test_feasible_on_the_real_h100_and_the_lock_is_current():
    target, facts = h100_node()
    recipe = load_recipe(RECIPE)
    verdict = preflight(recipe, target, facts)
    assert verdict.feasible, [v.message for v in verdict.violations]
    assert recipe.variant_of == "alpa-megatron"
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, target)
    assert {g.name: g.sha[:8] for g in lock.git} == {"megatron": "c28bbd20", "apex": "6424da3b", "alpa": "e0ae8bf8"}
    given = {p.name for p in lock.packages if p.source == "preinstalled"}
    assert {"torch", "numpy", "ninja"} <= given  # the node's own: never packed, never installed


def test_published_pins_are_refused_on_the_h100_node_with_the_reason(tmp_path):
    target, facts = h100_node()
    published = preflight(load_recipe("alpa-megatron"), target, facts)
    rows = {v.rule: v.message for v in published.errors}
    assert "sm_90" in rows["wheel-lacks-gpu-arch"] and "cu111" in rows["wheel-lacks-gpu-arch"]
    assert "sm_70/sm_80" in rows["megatron-fused-kernels-arch"]
    assert [v.recipe for v in published.variants] == [RECIPE] and published.variants[0].targets == ["h100-venv"]
    # this recipe with alpa-megatron's Apex pin: refused for torch._six
    text = (Path("envbuild/recipes/data") / f"{RECIPE}.yaml").read_text().replace(
        "sha: 6424da3b4faa6c8f062da4a48c424fff3f02d42d", "sha: e2083df5eb96643c61613b9df48dd4eea6b07690")
    old_apex = tmp_path / "old-apex.yaml"
    old_apex.write_text(text)
    verdict = preflight(load_recipe(str(old_apex)), target, facts)
    assert not verdict.feasible
    assert "torch._six" in {v.rule: v.message for v in verdict.errors}["apex-torch-six"]


def test_the_gencode_row_reads_the_patched_arch(tmp_path):
    """Without the fused-kernels-sm90 patch the row refuses the H100; with it, it is quiet."""
    target, facts = h100_node()
    text = (Path("envbuild/recipes/data") / f"{RECIPE}.yaml").read_text()
    start = text.index("  - id: fused-kernels-sm90\n    kind: replace")
    end = text.index("  - id: jit-modules-by-name\n    kind: replace")
    stripped = tmp_path / "no-gencode-patch.yaml"
    stripped.write_text(text[:start] + text[end:].replace(
        "    file: megatron/fused_kernels/__init__.py\n    old: |2\n",
        "    file: megatron/model/fused_softmax.py\n    old: |2\n", 1))
    rows = {v.rule for v in preflight(load_recipe(str(stripped)), target, facts).errors}
    assert "megatron-fused-kernels-arch" in rows
    assert "megatron-fused-kernels-arch" not in {v.rule for v in preflight(load_recipe(RECIPE), target, facts).errors}


PATCHED = {
    "tie-embedding-disabled": "training.py.txt",
    "torch-six-inf": "clip_grads.py.txt",
    "numpy-float-alias": "indexed_dataset.py.txt",
    "fused-kernels-sm90": "fused_kernels_init.py.txt",
    "jit-modules-by-name": "fused_kernels_init.py.txt",
    "launch-to-run": "benchmark_gpt.py.txt",
    "args-suite-undefined": "benchmark_gpt.py.txt",
    "two-gpu-case": "benchmark_gpt.py.txt",
}


def test_every_patch_has_an_excerpt():
    assert {p.id for p in load_recipe(RECIPE).patches} == set(PATCHED)


@pytest.mark.parametrize("patch_id", sorted(PATCHED))
def test_patches_apply_to_the_pinned_text_once(patch_id):
    from envbuild.node.textpatch import apply_text_patch

    p = next(x for x in load_recipe(RECIPE).patches if x.id == patch_id)
    text = (EXCERPTS / PATCHED[patch_id]).read_text()
    status, after = apply_text_patch(text, p.kind, p.old, p.new, p.count)
    if p.kind == "expect":
        assert status == "already-applied" and after == text
        return
    assert status == "applied" and after != text
    again, same = apply_text_patch(after, p.kind, p.old, p.new, p.count)
    assert again == "already-applied" and same == after
    gone = {"torch-six-inf": "from torch._six", "numpy-float-alias": "np.float",
            "fused-kernels-sm90": "compute_70", "launch-to-run": "torch.distributed.launch",
            "args-suite-undefined": "args.suite"}
    if patch_id in gone:
        assert gone[patch_id] not in after


# alpa e0ae8bf benchmark/alpa/suite_paper_manual_gpt.py:9-19 (S, H, L, heads, V), which
# benchmark_gpt.py imports; what the driver passes on is checked, not these numbers
GPT_SPECS = {"350M": (1024, 1024, 24, 16, 51200), "1.3B": (1024, 2048, 24, 32, 51200),
             "2.6B": (1024, 2560, 32, 32, 51200), "6.7B": (1024, 4096, 32, 32, 51200),
             "15B": (1024, 5120, 48, 40, 51200)}


def _run_driver(text: str, nproc: int) -> list[str]:
    """Alpa's benchmark_gpt.py (the excerpt: its suite, benchmark_all and __main__) run with
    ``--nproc_per_node nproc``; run_cmd, which starts the ranks on GPUs, records its command."""
    ran: list[str] = []
    ns = {"__name__": "__main__", "argparse": __import__("argparse"), "gpt_specs": GPT_SPECS,
          "run_cmd": ran.append}
    argv = sys.argv
    sys.argv = ["benchmark_gpt.py", "--nproc_per_node", str(nproc)]
    try:
        exec(compile(text, "benchmark_gpt.py", "exec"), ns)
    except SystemExit:
        pass
    finally:
        sys.argv = argv
    return ran


def _patched_driver() -> str:
    from envbuild.node.textpatch import apply_text_patch

    text = (EXCERPTS / "benchmark_gpt.py.txt").read_text().split("\n", 2)[2]
    for p in load_recipe(RECIPE).patches:
        if p.file == "osdi22_artifact/megatron/benchmark_gpt.py":
            status, text = apply_text_patch(text, p.kind, p.old, p.new, p.count)
            assert status == "applied", (p.id, status)
    return text


def test_published_driver_dies_on_two_gpus_with_attribute_error():
    """The erratum (alpa-megatron args-suite-undefined): the pinned text, on 2 GPUs."""
    text = (EXCERPTS / "benchmark_gpt.py.txt").read_text().split("\n", 2)[2]
    with pytest.raises(AttributeError, match="suite"):
        _run_driver(text, 2)
    assert len(_run_driver(text, 1)) == 1  # 1 GPU has its case


def test_patched_driver_runs_a_case_on_two_gpus_and_says_when_none(capsys):
    text = _patched_driver()
    one, two, four = (_run_driver(text, n) for n in (1, 2, 4))
    assert len(one) == len(two) == len(four) == 1
    assert "torch.distributed.run --nproc_per_node 2 benchmark_gpt_one_case.py" in two[0]
    case = eval(two[0].split('"')[1])  # the tuple benchmark_gpt_one_case.py evals
    model, batch, seq, hidden, layers, heads, vocab, dp, tp, _, _, pp, micro_batches = case[:13]
    one_case = eval(one[0].split('"')[1])
    # the 1-GPU case's model and per-GPU shape on two data-parallel ranks
    assert (seq, hidden, layers, heads, vocab) == GPT_SPECS["350M"] == one_case[2:7]
    assert (dp, tp, pp) == (2, 1, 1) and micro_batches == one_case[12] == 8
    assert batch // dp // micro_batches == one_case[1] // 1 // one_case[12] == 16
    assert case[13:] == one_case[13:]  # force_dp, remat, RS, stage mode, overrides
    assert "1.3B" not in two[0] and eval(four[0].split('"')[1])[3] == GPT_SPECS["1.3B"][1]
    capsys.readouterr()
    assert _run_driver(text, 3) == []  # no case for 3: said, not an AttributeError
    assert "No available benchmark suite for gpt_megatron_best_suite with 3 GPUs." in capsys.readouterr().out


def test_the_benchmark_passes_every_visible_gpu_and_is_judged_per_gpu_count():
    bench = load_recipe(RECIPE).benchmark
    assert "--nproc_per_node" in bench.command and "torch.cuda.device_count()" in bench.command
    assert "--nproc_per_node 1" not in bench.command
    assert bench.same_gpu_count and bench.per_gpu and bench.needs_gpus == 1


def _patched_loader() -> str:
    from envbuild.node.textpatch import apply_text_patch

    text = (EXCERPTS / "fused_kernels_init.py.txt").read_text().split("\n", 2)[2]
    for p in load_recipe(RECIPE).patches:
        if p.file == "megatron/fused_kernels/__init__.py":
            status, text = apply_text_patch(text, p.kind, p.old, p.new, p.count)
            assert status == "applied", (p.id, status)
    return text


def _run_loader(body: str, name: str) -> tuple[object, dict]:
    """Megatron's helper inside a load(): a stand-in cpp_extension.load records its arguments and
    returns a fresh module, as torch 2.x's does (nothing put in sys.modules)."""
    seen: dict = {}

    def fake_load(**kw):
        seen.update(kw)
        return types.ModuleType(kw["name"])

    src = "def load(args, buildpath, cc_flag):\n" + body + "\n    return _cpp_extention_load_helper(NAME, ['k.cu'], [])\n"
    ns = {"cpp_extension": types.SimpleNamespace(load=fake_load), "NAME": name}
    exec(compile(src, "fused_kernels/__init__.py", "exec"), ns)
    return ns["load"](types.SimpleNamespace(rank=0), "/tmp/build", []), seen


def test_patched_kernel_loader_registers_modules_by_name():
    name = "envbuild_test_fused_kernel"
    sys.modules.pop(name, None)
    try:
        unpatched = (EXCERPTS / "fused_kernels_init.py.txt").read_text().split("\n", 2)[2]
        _run_loader(unpatched, name)
        with pytest.raises(ModuleNotFoundError):  # the H100's first run: No module named ...
            importlib.import_module(name)
        module, seen = _run_loader(_patched_loader(), name)
        assert importlib.import_module(name) is module  # what fused_layer_norm.py does
        flags = seen["extra_cuda_cflags"]
        assert flags[flags.index("-gencode") + 1] == "arch=compute_90,code=sm_90"
    finally:
        sys.modules.pop(name, None)


def test_the_fused_kernels_are_built_at_provision_as_the_first_start_would(tmp_path):
    """Deviation fused-kernels-at-provision: the megatron source's build command loads the tree's own
    megatron/fused_kernels/__init__.py (not through megatron/__init__.py, which imports the rest of
    Megatron) and calls its load() with what the benchmark's first start passes: rank 0 and the masked
    softmax fusion on (benchmark_gpt_one_case.py gives no --no-masked-softmax-fusion). A loader that
    records its arguments stands in for the CUDA build; this CPU has no GPU, so the guarded command
    itself says so and builds nothing."""
    import os
    import re
    import subprocess

    megatron = next(s for s in load_recipe("alpa-megatron-h100").sources if s.name == "megatron")
    command = megatron.build[-1]
    kernels = tmp_path / "megatron" / "fused_kernels"
    kernels.mkdir(parents=True)
    (kernels / "__init__.py").write_text(
        "import json, pathlib\n"
        "def load(args):\n"
        "    pathlib.Path('loaded.json').write_text(json.dumps({'file': __file__, **vars(args)}))\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    guarded = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert guarded.returncode == 0 and "no GPU here" in guarded.stdout
    assert not (tmp_path / "loaded.json").exists()
    then = re.search(r'then (python -c ".*?");\s*else', command, re.S)
    assert then, "the command's build branch"
    subprocess.run(["bash", "-c", then.group(1)], cwd=tmp_path, env=env, check=True)
    loaded = json.loads((tmp_path / "loaded.json").read_text())
    assert loaded == {"file": str(kernels / "__init__.py"), "rank": 0, "masked_softmax_fusion": True}


def test_the_h100_run_is_parsed_beside_the_v100_figure(capsys):
    """The raw output of the H100 run (docs/results/alpa-megatron/h100-native.out, NumPy 2
    prints np.float64(...)) is read by `envbuild parse`: on its H100 it is one of the 1-GPU
    reference's three runs, never its own yardstick: judged against the two others; the V100
    figure is shown, not compared."""
    from envbuild.cli import main

    log = RESULTS / "h100-native.out"
    rc = main(["parse", RECIPE, str(log), "--gpu", "NVIDIA H100 80GB HBM3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] == "PASS", out["reason"]
    assert out["compared"]["runs"] == ["alpa-megatron/h100-run3-native.out", "alpa-megatron/h100-run4-native.out"]
    assert ("this record is itself one of the reference's runs on 1 x NVIDIA H100 80GB HBM3, "
            "never its own yardstick") in out["reason"]
    line = next(x for x in log.read_text().splitlines() if "method: megatron" in x)
    printed = float(line.split("np.float64(")[1].split(")")[0])
    assert out["value"] == pytest.approx(printed) and out["metrics"]["results"] == 1
    assert out["published"]["value"] == 47.53 and out["published"]["gpu"] == "Tesla V100-SXM2-16GB"
    assert out["published"]["compared"] is False and out["published"]["percent"] is None
    assert json.loads((RESULTS / "h100-parse.json").read_text())["value"] == out["value"]


def test_the_second_h100_run_passes_against_the_others_and_names_them(capsys):
    from envbuild.cli import main

    log = RESULTS / "h100-run3-native.out"
    rc = main(["parse", RECIPE, str(log), "--gpu", "NVIDIA H100 80GB HBM3"])
    out = capsys.readouterr().out
    verdict = next(x for x in out.splitlines() if x.startswith("verdict:"))
    assert rc == 0 and verdict.startswith("verdict: PASS")
    assert str(log) in verdict and "docs/results/alpa-megatron/h100-native.out" in verdict
    assert "docs/results/alpa-megatron/h100-run4-native.out" in verdict and "median" in verdict and "floor 5%" in verdict


@pytest.mark.parametrize("gpu", ["NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB", None])
def test_a_gpu_without_a_reference_is_not_judged_and_names_the_referenced_models(gpu, capsys):
    from envbuild.cli import main
    from envbuild.errors import NOT_JUDGED

    rc = main(["parse", RECIPE, str(RESULTS / "h100-native.out"), "--json", *(["--gpu", gpu] if gpu else [])])
    out = json.loads(capsys.readouterr().out)
    assert rc == NOT_JUDGED and out["verdict"] == "NOT JUDGED" and out["compared"] is None
    assert out["reason"].endswith("references exist for: H100 80GB, H200"), out["reason"]  # 1 x H100, 4 x H200


def test_check_of_alpa_megatron_on_an_sm90_node_names_the_variant(capsys):
    from envbuild.cli import main

    rc = main(["check", "alpa-megatron", "--target", "h100"])
    out = capsys.readouterr()
    assert rc == 1
    assert "variant for this GPU: alpa-megatron-h100" in out.out
    assert "envbuild check alpa-megatron-h100 --target h100-venv" in out.out
    assert "variant recipe alpa-megatron-h100" in out.err
    rc = main(["check", "alpa-megatron", "--target", "h100", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["variants"][0]["recipe"] == "alpa-megatron-h100"


@pytest.mark.parametrize("name", ["alpa-megatron", RECIPE])
def test_the_recipes_say_the_1gpu_case_as_the_driver_runs_it(name):
    """Global batch, micro-batch count and size in the recipe's words are the pinned 1-GPU case's
    (benchmark_gpt_one_case.py: micro = global // dp // micro-batches), not "micro-batch 8"."""
    text = (EXCERPTS / "benchmark_gpt.py.txt").read_text().split("\n", 2)[2]
    case = eval(_run_driver(text, 1)[0].split('"')[1])
    batch, dp, micro_batches = case[1], case[7], case[12]
    words = " ".join(load_recipe(name).benchmark.why.split())
    assert f"global batch {batch} as {micro_batches} micro-batches of {batch // dp // micro_batches}" in words
    assert "micro-batch 8" not in words


def _alpa_plan(recipe_path: str | Path = RECIPE, nvcc: str | None = None, prefix: str = "/opt/envs/alpa"):
    from envbuild.lock.serialize import read_lock
    from envbuild.plan.build import PlanOptions, build_plan

    target, facts = h100_node()
    if nvcc is not None:
        facts = facts.model_copy(update={"nvcc": nvcc})
    lock = read_lock(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock")
    return build_plan(load_recipe(str(recipe_path)), target, facts, lock, PlanOptions(prefix=prefix))


def test_the_fused_kernels_build_folder_is_cached_per_key_around_the_build_commands(tmp_path):
    """The megatron source's build_outputs: the plan's build step names the folder and a key of
    what it depends on, the key changes with the patches, nvcc and the tree's path (ninja records
    command lines that name it) and with nothing else of the plan, and the playbook's batches restore
    the cached folder before the commands and take the node's after them."""
    from envbuild.render.ansible import batches

    plan = _alpa_plan()
    [step] = [s for s in plan.cached_builds() if s.id == "build:megatron"]
    assert step.params.outputs == ["megatron/fused_kernels/build"]
    key = step.params.cache_key
    assert key.startswith("tree-megatron-c28bbd208d16-")
    assert [s.id for s in plan.cached_builds()] == ["build:megatron", "apex:apex"]
    assert _alpa_plan().builds()[0].params.cache_key == key  # a pure function of its inputs
    assert _alpa_plan(nvcc="13.1.80").builds()[0].params.cache_key != key
    assert _alpa_plan(prefix="/elsewhere").builds()[0].params.cache_key != key
    repatched = tmp_path / "r.yaml"
    text = (ROOT / "envbuild" / "recipes" / "data" / f"{RECIPE}.yaml").read_text()
    repatched.write_text(text.replace("'-gencode', 'arch=compute_90,code=sm_90',",
                                      "'-gencode', 'arch=compute_90a,code=sm_90a',"))
    assert _alpa_plan(repatched).builds()[0].params.cache_key != key
    out = batches(step, "/opt/envs/alpa")
    tree = {"cache_key": key, "stash": f"/opt/envs/alpa/.envbuild/trees/{key}/outputs.tar",
            "root": "/opt/envs/alpa/src/megatron", "outputs": ["megatron/fused_kernels/build"]}
    assert out[0] == {"type": "tree_restore", **tree} and out[-1] == {"type": "tree_save", **tree}
    assert [b["type"] for b in out[1:-1]] == ["node"]
    assert [a["argv"][-1] for a in out[1]["actions"]] == step.params.commands
