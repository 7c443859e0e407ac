"""megatron-deepspeed-slurm-h100: the Slurm sample (microsoft/Megatron-DeepSpeed 87476ced +
DeepSpeed 0.6.3) on two GPUs of the H100 node over the node's own torch (CPU-side checks).

The facts of a real 2-GPU node of that image (docs/results/h200x2-run6/facts.json: two H200s,
torch 2.11.0+cu130 in /opt/torch/.venv) decide the plan; megatron-deepspeed-slurm is refused
on the node profile and `check` names this variant; every source change is a recipe patch that
applies once to the pinned text (excerpts in tests/data/mds_h100/); the benchmark is the
script's own launcher line with the options megatron-deepspeed-slurm publishes, changed only
where a deviation says.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from envbuild.compat.check import preflight
from envbuild.facts.load import load_facts
from envbuild.lock.check import check_lock_file
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.paths import DATA, ROOT

EXCERPTS = DATA / "mds_h100"
TWO_GPUS = ROOT / "docs" / "results" / "h200x2-run6" / "facts.json"
RECIPE = "megatron-deepspeed-slurm-h100"


def node():
    return load_target("h100-venv"), load_facts(TWO_GPUS)[0]


def test_feasible_on_the_real_h100_and_the_lock_is_current():
    """Feasible on a 2-GPU node of the H100 image (the benchmark needs 2 GPUs: the one-GPU
    profile alone says too-few-gpus); the lock pins the four trees and reuses the node's torch."""
    target, facts = node()
    recipe = load_recipe(RECIPE)
    verdict = preflight(recipe, target, facts)
    assert verdict.feasible, [v.message for v in verdict.violations]
    assert recipe.variant_of == "megatron-deepspeed-slurm"
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, target)
    assert {g.name: g.sha[:8] for g in lock.git} == {
        "deepspeed": "dda03361", "megatron-deepspeed": "87476ced", "apex": "6424da3b", "gpt2-vocab": "f4157bea"}
    given = {p.name for p in lock.packages if p.source == "preinstalled"}
    assert {"torch", "numpy", "ninja", "setuptools"} <= given  # the node's own: never packed
    assert {p.name for p in lock.packages if p.source != "preinstalled"} >= {"hjson", "nltk"}


def test_check_of_megatron_deepspeed_slurm_on_an_sm90_node_names_the_variant(capsys):
    from envbuild.cli import main

    rc = main(["check", "megatron-deepspeed-slurm", "--target", "h100-venv"])
    out = capsys.readouterr()
    assert rc == 1
    assert f"variant for this GPU: {RECIPE}" in out.out
    assert f"envbuild check {RECIPE} --target h100-venv" in out.out
    rc = main(["check", "megatron-deepspeed-slurm", "--target", "h100-venv", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert [v["recipe"] for v in data["variants"]] == [RECIPE]


PATCHED = {
    "ds-utils-torch-six-inf": "ds_utils.py.txt",
    "ds-stage3-torch-six-inf": "ds_stage3.py.txt",
    "ds-stage12-torch-six-inf": "ds_stage_1_and_2.py.txt",
    "ds-numpy-bufsize": "ds_autotuning_scheduler.py.txt",
    "torch-six-inf": "clip_grads.py.txt",
    "numpy-float-alias": "indexed_dataset.py.txt",
    "fused-kernels-sm90": "fused_kernels_init.py.txt",
    "jit-modules-by-name": "fused_kernels_init.py.txt",
    "sample-idx-python": "gpt_dataset.py.txt",
}
GONE = {"numpy-float-alias": "np.float,", "fused-kernels-sm90": "compute_70",
        "sample-idx-python": "= helpers.build_sample_idx", "ds-numpy-bufsize": "from numpy import"}


def test_every_patch_has_an_excerpt():
    assert {p.id for p in load_recipe(RECIPE).patches} == set(PATCHED)


@pytest.mark.parametrize("patch_id", sorted(PATCHED))
def test_patches_apply_to_the_pinned_text_once(patch_id):
    from envbuild.node.textpatch import apply_text_patch

    p = next(x for x in load_recipe(RECIPE).patches if x.id == patch_id)
    text = (EXCERPTS / PATCHED[patch_id]).read_text()
    status, after = apply_text_patch(text, p.kind, p.old, p.new, p.count)
    assert status == "applied" and after != text
    again, same = apply_text_patch(after, p.kind, p.old, p.new, p.count)
    assert again == "already-applied" and same == after
    gone = GONE.get(patch_id, "from torch._six" if "torch-six" in patch_id else None)
    if gone:
        assert gone not in after
    compile(textwrap.dedent(after.split("\n", 2)[2]), PATCHED[patch_id], "exec")  # still Python


def _patched_loader() -> str:
    from envbuild.node.textpatch import apply_text_patch

    text = (EXCERPTS / "fused_kernels_init.py.txt").read_text().split("\n", 2)[2]
    for p in load_recipe(RECIPE).patches:
        if p.file == "megatron/fused_kernels/__init__.py":
            status, text = apply_text_patch(text, p.kind, p.old, p.new, p.count)
            assert status == "applied", (p.id, status)
    return text


def _run_loader(body: str, name: str) -> tuple[object, dict]:
    """Megatron's helper inside a load(): a stand-in cpp_extension.load (no nvcc here) records
    its arguments and returns a fresh module, as torch 2.x's does (nothing put in sys.modules)."""
    seen: dict = {}

    def fake_load(**kw):
        seen.update(kw)
        return types.ModuleType(kw["name"])

    src = "def load(args, buildpath, cc_flag):\n" + body + "\n    return _cpp_extention_load_helper(NAME, ['k.cu'], [])\n"
    ns = {"cpp_extension": types.SimpleNamespace(load=fake_load), "NAME": name}
    exec(compile(src, "fused_kernels/__init__.py", "exec"), ns)
    return ns["load"](types.SimpleNamespace(rank=0), "/tmp/build", []), seen


def test_patched_kernel_loader_registers_modules_by_name():
    name = "envbuild_test_mds_fused_kernel"
    sys.modules.pop(name, None)
    try:
        unpatched = (EXCERPTS / "fused_kernels_init.py.txt").read_text().split("\n", 2)[2]
        _run_loader(unpatched, name)
        with pytest.raises(ModuleNotFoundError):  # what fused_layer_norm.py:68 would meet
            importlib.import_module(name)
        module, seen = _run_loader(_patched_loader(), name)
        assert importlib.import_module(name) is module
        flags = seen["extra_cuda_cflags"]
        assert flags[flags.index("-gencode") + 1] == "arch=compute_90,code=sm_90"
    finally:
        sys.modules.pop(name, None)


def _plan():
    from envbuild.lock import read_lock
    from envbuild.plan.build import PlanOptions, build_plan

    target, facts = node()
    recipe = load_recipe(RECIPE)
    lock = read_lock(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock")
    return build_plan(recipe, target, facts, lock, PlanOptions(prefix="/opt/envs/mds"))


def test_plan_builds_apex_installs_deepspeed_and_prebuilds_the_kernels():
    plan = _plan()
    ids = [s.id for s in plan.steps]
    by_id = {s.id: s for s in plan.steps}
    # DeepSpeed's tree is patched before pip builds it (non-editable, without isolation)
    assert ids.index("patch:ds-stage12-torch-six-inf") < ids.index("install:deepspeed")
    assert by_id["install:deepspeed"].params.mode == "wheel"
    assert "apex:apex" in ids  # Apex 6424da3b's CUDA-aware build (deviation apex-not-in-the-node)
    # the kernels are built by the patched loader: every patch of the tree comes first
    build = by_id["build:megatron-deepspeed"]
    assert all(ids.index(f"patch:{p}") < ids.index(build.id)
               for p in ("fused-kernels-sm90", "jit-modules-by-name", "sample-idx-python"))
    assert any("megatron/fused_kernels/__init__.py" in c and "m.load(" in c for c in build.params.commands)
    # DeepSpeed's utils op is built by DeepSpeed's own builder, once DeepSpeed is installed
    assert any("UtilsBuilder().load()" in c for c in build.params.commands)
    assert ids.index("install:deepspeed") < ids.index(build.id)
    # on the 2-GPU node the recipe's own benchmark runs, from the Megatron-DeepSpeed tree
    native = next(r for r in by_id["smoke"].params.runs if r.name == "native")
    assert native.cwd == "/opt/envs/mds/src/megatron-deepspeed"
    assert "/opt/envs/mds/src/gpt2-vocab/examples_deepspeed/rebase/gpt2-vocab.json" in native.argv[-1]


def test_the_fused_kernel_build_leaves_a_gpu_less_node_to_the_first_start(tmp_path):
    """The build step's kernel command, run here (no GPU): it stops before loading anything and
    says so, exit 0, leaving the kernels to Megatron's own JIT build at the first start."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    cmd = load_recipe(RECIPE).source("megatron-deepspeed").build[1]
    kernels = tmp_path / "megatron" / "fused_kernels"
    kernels.mkdir(parents=True)
    (kernels / "__init__.py").write_text("raise SystemExit('loaded')\n")
    out = subprocess.run(["bash", "-ec", cmd.replace("python3", shlex.quote(sys.executable), 1)],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "no GPU: the fused kernels are built at the first start" in out.stdout


PUBLISHED_CHANGED = {  # option -> (published value, this benchmark's), each a deviation
    "--tensor-model-parallel-size": ("4", "2"),  # two-gpus-tensor-parallel-2
    "--train-iters": ("1000", "40"),  # two-gpus-tensor-parallel-2
}


def _commands(text: str) -> list[str]:
    """The ';'-separated commands of a shell line, each as the text between the separators
    (quotes respected: the python -c code holds ';' of its own)."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=";")
    lex.whitespace_split = True
    out, words = [], []
    for tok in lex:
        if tok == ";":
            out.append(shlex.join(words))
            words = []
        else:
            words.append(tok)
    return [c for c in out + [shlex.join(words)] if c]


def _options(argv: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--") and "=" in word:
            key, value = word.split("=", 1)
            out[key] = value
        elif word.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is not None and not nxt.startswith("--"):
                out[word] = nxt
                i += 1
            else:
                out[word] = None
        i += 1
    return out


def test_the_benchmark_runs_what_the_deviations_say():
    """The published launcher line and options (megatron-deepspeed-slurm's run.default, read from
    megatron_ds_snmg.slurm) with only the deviations' changes: 2 GPUs, TP 2, 40 iterations,
    the data and vocabulary paths; ds_config.json as the script writes it; data preparation
    first, with the README's preprocess_data.py options on the corpus of the DeepSpeed docs."""
    published = load_recipe("megatron-deepspeed-slurm").run["default"]
    bench = load_recipe(RECIPE).benchmark
    commands = _commands(bench.command)
    words = shlex.split(bench.command)
    ds = words.index("deepspeed")
    assert words[ds:ds + 4] == ["deepspeed", "--num_gpus", "2", "pretrain_gpt.py"]
    assert bench.needs_gpus == 2 and bench.same_gpu_count and bench.threshold is None
    ours = _options(words[ds + 4:])
    theirs = _options(list(published.argv[1:]))
    assert set(ours) == set(theirs)
    paths = {"--data-path", "--vocab-file", "--merge-file", "--deepspeed_config"}
    for key, value in theirs.items():
        if key in PUBLISHED_CHANGED:
            assert (value, ours[key]) == PUBLISHED_CHANGED[key], key
        elif key not in paths:
            assert ours[key] == value, key
    assert ours["--data-path"] == "my-gpt2_text_document"
    assert ours["--vocab-file"].endswith("{sources.gpt2-vocab}/examples_deepspeed/rebase/gpt2-vocab.json")
    assert ours["--merge-file"].endswith("{sources.gpt2-vocab}/examples_deepspeed/rebase/gpt2-merges.txt")
    # ds_config.json: the script's file, key for key
    printf = next(c for c in commands if c.startswith("printf"))
    written = json.loads(shlex.split(printf)[1])
    assert written == json.loads(published.files["ds_config.json"])
    # the README's preprocess_data.py options, on the corpus written before it
    pre = next(c for c in commands if "tools/preprocess_data.py" in c)
    pre_opts = _options(shlex.split(pre)[2:])
    readme = _options(shlex.split(load_recipe("megatron-deepspeed-slurm").source("megatron-deepspeed").build[0])[2:])
    assert set(pre_opts) == set(readme)
    for key in ("--output-prefix", "--dataset-impl", "--tokenizer-type", "--append-eod", "--workers"):
        assert pre_opts[key] == readme[key], key
    assert pre_opts["--input"] == "corpus.jsonl"
    assert commands.index(pre) < next(i for i, c in enumerate(commands) if c.startswith("deepspeed"))


def test_the_corpus_command_writes_one_json_line_per_markdown_file_in_path_order(tmp_path):
    """The benchmark's corpus: every *.md under the given folder, sorted by path, one
    {"text": ...} line each, the input preprocess_data.py reads (json.loads per line, key text)."""
    bench = load_recipe(RECIPE).benchmark
    first = next(c for c in _commands(bench.command) if "corpus.jsonl" in c and c.startswith("python -c"))
    docs = tmp_path / "docs"
    (docs / "b").mkdir(parents=True)
    (docs / "b" / "two.md").write_text("Second\nline with \"quotes\"\n")
    (docs / "a.md").write_text("First: é\n")
    (docs / "skip.txt").write_text("not markdown")
    words = shlex.split(first.replace("{sources.deepspeed}/docs", str(docs)))
    assert words[0] == "python"
    subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, check=True)
    lines = (tmp_path / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["text"] for x in lines] == ["First: é\n", "Second\nline with \"quotes\"\n"]


def test_the_vocabulary_is_the_blob_megatron_deepspeed_commits():
    """gpt2-vocab.json / gpt2-merges.txt at f4157bea are the blobs Megatron-DeepSpeed put at its
    root (the Slurm script's file names) in 69f75b1e; read from a git mirror when one is given
    (ENVBUILD_GIT_MIRROR), else the recipe's pin and paths only."""
    src = load_recipe(RECIPE).source("gpt2-vocab")
    assert src.sha == "f4157bea69f3df8c6cb66f2ebcda66ba03d1288e" and src.install == "none"
    mirror_root = os.environ.get("ENVBUILD_GIT_MIRROR")
    if not mirror_root:
        pytest.skip("no git mirror (ENVBUILD_GIT_MIRROR): the blob ids are not read here")
    from envbuild.gitsrc import mirror_path

    mirror = mirror_path(src.url, Path(mirror_root))
    assert mirror is not None, "the mirror has no microsoft/Megatron-DeepSpeed"

    def blob(rev: str, path: str) -> str:
        return subprocess.run(["git", "-C", str(mirror), "rev-parse", f"{rev}:{path}"], check=True,
                              capture_output=True, text=True).stdout.strip()

    for name in ("gpt2-vocab.json", "gpt2-merges.txt"):
        assert blob(src.sha, f"examples_deepspeed/rebase/{name}") == blob(
            "69f75b1e6daa9c97878fc731d6ea179e9d9865d9", name)
