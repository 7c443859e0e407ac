"""megatronapp-h100: MegatronApp (seed 002) on one node of H100s over the node's own torch 2.11
(CPU-side checks).

The real node's facts (tests/fixtures/nodes/h100-ubuntu2404-cuda13, one H100; the run needs four,
so the GPU list is widened to four of the same card: absent hardware doubled) decide the plan;
`check` of megatronapp names this variant; every source change is a recipe patch that applies
once to the pinned text (excerpts in tests/data/megatronapp_h100/); the carried rdma-core is
recipe data with digests, unpacked before the extension's build; the 2-GPU rehearsal is the
example script's own training with pipeline parallel 2.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import sys
import types
from pathlib import Path

import pytest

from envbuild.compat.check import preflight
from envbuild.facts.assemble import assemble
from envbuild.facts.profile import from_target, refine
from envbuild.facts.script import split_sections
from envbuild.lock.check import check_lock_file
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.node.textpatch import apply_text_patch
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.paths import DATA, FIXTURES, ROOT

CAPTURE = FIXTURES / "nodes" / "h100-ubuntu2404-cuda13" / "facts-probe.txt"
EXCERPTS = DATA / "megatronapp_h100"
IMPORTS = ROOT / "envbuild" / "recipes" / "imports" / "megatronapp-h100.yaml"
RECIPE = "megatronapp-h100"
SHA = "1bed2a7202162d6eb2725e9769632a682021a6fb"


def excerpt(name: str) -> str:
    return (EXCERPTS / name).read_text().split("\n", 2)[2]


def node(gpus: int = 4):
    """The captured H100 node's facts, its one GPU listed ``gpus`` times (the 4-GPU kind)."""
    target = load_target("h100-venv")
    facts = refine(target, assemble(split_sections(CAPTURE.read_text()), "h100-node"))
    one = facts.gpus[0]
    return target, facts.model_copy(update={"gpus": [one.model_copy(update={"index": i}) for i in range(gpus)]})


def test_feasible_on_the_h100_node_and_the_lock_is_current():
    target, facts = node()
    recipe = load_recipe(RECIPE)
    verdict = preflight(recipe, target, facts)
    assert verdict.feasible, [v.message for v in verdict.violations]
    assert recipe.variant_of == "megatronapp" and recipe.benchmark.needs_gpus == 4
    lock = check_lock_file(SHIPPED_LOCKDIR / RECIPE / "h100-venv.lock", recipe, target)
    assert {g.name: g.sha[:8] for g in lock.git} == {"megatronapp": "1bed2a72", "apex": "6424da3b"}
    given = {p.name for p in lock.packages if p.source == "preinstalled"}
    assert {"torch", "numpy", "pybind11"} <= given  # the node's own: never packed, never installed
    # the same node with two GPUs: the published 4-GPU command is refused there
    rows = {v.rule: v.message for v in preflight(recipe, *node(2)).errors}
    assert "needs 4 GPU" in rows["too-few-gpus"]


def test_check_of_megatronapp_names_the_variant(capsys):
    from envbuild.cli import main

    rc = main(["check", "megatronapp", "--target", "h100-venv"])
    out = capsys.readouterr()
    assert rc == 1
    assert "variant for this GPU: megatronapp-h100" in out.out
    assert "envbuild check megatronapp-h100 --target h100-venv" in out.out
    rc = main(["check", "megatronapp", "--target", "h100-venv", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["variants"][0]["recipe"] == RECIPE
    assert {"container-runtime-missing", "rdma-needs-infiniband", "scheduler-mismatch"} <= {
        v["rule"] for v in data["violations"] if v["severity"] == "error"}


def test_rdma_row_is_quiet_only_when_every_run_is_one_node():
    target, facts = node()
    assert not facts.infiniband
    assert "rdma-needs-infiniband" not in {v.rule for v in preflight(load_recipe(RECIPE), target, facts).violations}
    published = load_recipe("megatronapp")  # its two-pods layout spans two nodes
    assert "rdma-needs-infiniband" in {v.rule for v in preflight(published, target, facts).errors}
    one_pod = published.model_copy(update={"run": {"default": published.run["default"]}})
    assert "rdma-needs-infiniband" not in {v.rule for v in preflight(one_pod, target, facts).violations}


def test_profile_check_counts_the_lent_gpu_kinds_and_a_node_its_own():
    target = load_target("h100-venv")
    assert target.gpus.count == 1 and max(target.lent_gpu_counts) == 8
    recipe = load_recipe(RECIPE)
    assert preflight(recipe, target, from_target(target)).feasible  # the profile: up to 8 cards
    sixteen = recipe.model_copy(update={"benchmark": recipe.benchmark.model_copy(update={"needs_gpus": 16})})
    rows = {v.rule: v.message for v in preflight(sixteen, target, from_target(target)).errors}
    assert "needs 16 GPU" in rows["too-few-gpus"]
    _, one = node(1)  # a node's own facts: its real count
    assert one.origin == "collected"
    assert "too-few-gpus" in {v.rule for v in preflight(recipe, target, one).errors}


def test_rdma_core_packages_are_data_files_with_digests():
    recipe = load_recipe(RECIPE)
    names = {d.name for d in recipe.data}
    assert names == {"libibverbs1", "librdmacm1", "libibverbs-dev", "librdmacm-dev", "libnl-3-200", "libnl-route-3-200"}
    for d in recipe.data:
        assert d.sha256 and d.component == "megatronapp"
        assert d.path == f".envbuild-debs/{d.mirror_name}" and d.mirror_name.endswith("_amd64.deb")
        assert d.url.startswith("http://deb.debian.org/debian/pool/main/")


def test_build_unpacks_rdma_core_then_installs_the_extension():
    recipe, target = load_recipe(RECIPE), load_target("h100-venv")
    plan = build_plan(recipe, target, from_target(target), None, PlanOptions(backend="venv", host="h100-node"))
    ids = [s.id for s in plan.steps]
    assert ids.index("data:megatronapp") < ids.index("build:megatronapp")
    assert max(i for i, s in enumerate(ids) if s.startswith("patch:")) < ids.index("data:megatronapp")
    build = next(s for s in plan.steps if s.id == "build:megatronapp")
    unpack, install, helpers = build.params.commands
    assert "-exec dpkg-deb -x {} .envbuild-rdma" in unpack and "find .envbuild-debs -name '*.deb'" in unpack
    assert "rdma/rdma_cma.h" in unpack  # the header the extension includes (shm_tensor_new_rdma.cpp:12)
    assert shlex.split(install) == ["python", "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "."]
    assert "Megatron/megatron/core/datasets" in helpers and "EXT_SUFFIX" in helpers


PATCHED = {
    "ib-addresses": "shm_tensor_new_rdma.cpp.txt",
    "cxx11-abi-from-torch": "setup.py.txt",
    "rdma-core-from-the-tree": "setup.py.txt",
    "rdma-core-include-and-libs": "setup.py.txt",
    "rdma-core-rpath": "setup.py.txt",
    "te-absent-stand-in": "transformer_engine.py.txt",
    "packaging-not-pkg-resources": "transformer_engine.py.txt",
    "torchrun-of-the-env": "pretrain_gpt_distributed_small.sh.txt",
    "join-threads-releases-gil": "shm_tensor_new_rdma_module.cpp.txt",
}


def test_every_patch_has_an_excerpt():
    assert {p.id for p in load_recipe(RECIPE).patches} == set(PATCHED)


@pytest.mark.parametrize("patch_id", sorted(PATCHED))
def test_patches_apply_to_the_pinned_text_once(patch_id):
    p = next(x for x in load_recipe(RECIPE).patches if x.id == patch_id)
    text = excerpt(PATCHED[patch_id])
    status, after = apply_text_patch(text, p.kind, p.old, p.new, p.count)
    assert status == "applied" and after != text
    again, same = apply_text_patch(after, p.kind, p.old, p.new, p.count)
    assert again == "already-applied" and same == after
    gone = {"torchrun-of-the-env": "\ntorchrun ", "cxx11-abi-from-torch": '"-D_GLIBCXX_USE_CXX11_ABI=0"',
            "ib-addresses": "192.168.0.2", "packaging-not-pkg-resources": "pkg_resources import",
            "join-threads-releases-gil": 'm.def("join_threads", &join_threads);'}
    if patch_id in gone:
        assert gone[patch_id] not in after


def test_join_threads_alone_releases_the_gil():
    """After the patch join_threads is the one binding that waits without the GIL: the put/get
    bindings keep it (they convert tensors), and the threads' code is untouched."""
    text = _patched("shm_tensor_new_rdma_module.cpp.txt")
    guarded = [line for line in text.splitlines() if "gil_scoped_release" in line]
    assert guarded == ['  m.def("join_threads", &join_threads, py::call_guard<py::gil_scoped_release>());']
    assert text.count("m.def(") == excerpt("shm_tensor_new_rdma_module.cpp.txt").count("m.def(")


def test_torch_decrefs_the_pyobject_when_a_cpp_reference_goes():
    """Why join_threads must not hold the GIL: torch's intrusive_ptr decrefs a tensor's PyObject
    (which takes the GIL) when its C++ refcount goes from 2 to 1 (the PyObject preservation note
    of torch 2.11, the node's). Read in the installed torch's headers where there is one."""
    torch_dir = importlib.util.find_spec("torch")
    if torch_dir is None or not torch_dir.submodule_search_locations:
        pytest.skip("torch is not installed here")
    header = Path(list(torch_dir.submodule_search_locations)[0]) / "include/c10/util/intrusive_ptr.h"
    if not header.exists():
        pytest.skip("this torch has no C++ headers")
    text = header.read_text()
    assert "When the refcount goes from 2 to 1, we decref the PyObject." in text
    assert "target->decref_pyobject();" in text


def _patched(file: str) -> str:
    text = excerpt(PATCHED[next(k for k, v in PATCHED.items() if v == file)])
    for p in load_recipe(RECIPE).patches:
        if PATCHED[p.id] == file:
            status, text = apply_text_patch(text, p.kind, p.old, p.new, p.count)
            assert status == "applied", (p.id, status)
    return text


def test_patched_setup_points_at_the_carried_rdma_core(tmp_path, monkeypatch):
    """The patched setup.py, run with stand-ins for setuptools.setup and torch's CppExtension
    (absent here), asks for the carried headers and libraries and a DT_RPATH into them."""
    seen: dict = {}
    setuptools = types.ModuleType("setuptools")
    setuptools.setup = lambda **kw: seen.update(kw)
    cpp = types.ModuleType("torch.utils.cpp_extension")
    cpp.CppExtension = lambda **kw: kw
    cpp.BuildExtension = object
    cpp.include_paths = lambda: ["/torch/include"]
    for name, module in {"setuptools": setuptools, "torch": types.ModuleType("torch"),
                         "torch.utils": types.ModuleType("torch.utils"), "torch.utils.cpp_extension": cpp}.items():
        monkeypatch.setitem(sys.modules, name, module)
    setup_py = tmp_path / "setup.py"
    setup_py.write_text(_patched("setup.py.txt"))
    exec(compile(setup_py.read_text(), str(setup_py), "exec"), {"__file__": str(setup_py), "__name__": "__main__"})
    (ext,) = seen["ext_modules"]
    rdma = tmp_path / ".envbuild-rdma"
    libs = [str(rdma / "usr/lib/x86_64-linux-gnu"), str(rdma / "lib/x86_64-linux-gnu")]
    assert ext["include_dirs"] == ["/torch/include", str(rdma / "usr/include")]
    assert ext["library_dirs"] == libs
    assert ext["libraries"][:2] == ["rdmacm", "ibverbs"]
    link = ext["extra_link_args"]
    assert "-Wl,--disable-new-dtags" in link
    assert [f"-Wl,-rpath,{d}" for d in libs] == [a for a in link if a.startswith("-Wl,-rpath,/")]
    assert not any("_GLIBCXX_USE_CXX11_ABI" in a for a in ext["extra_compile_args"])


def test_te_stand_in_imports_and_refuses_to_build_a_te_layer(monkeypatch):
    """Without Transformer Engine the unpatched import stops the program; the patched one gives
    base classes the module can subclass at import, and building a TE layer stops with a message
    naming the deviation."""
    monkeypatch.setitem(sys.modules, "transformer_engine", None)  # not installed: import raises
    p = next(x for x in load_recipe(RECIPE).patches if x.id == "te-absent-stand-in")
    with pytest.raises(ImportError):
        exec(compile(p.old, "transformer_engine.py", "exec"), {})
    ns: dict = {}
    exec(compile(p.new + "class TELinear(te.pytorch.Linear):\n    pass\n", "transformer_engine.py", "exec"), ns)
    for name in ("Linear", "LayerNormLinear", "DotProductAttention", "LayerNorm", "RMSNorm"):
        assert isinstance(getattr(ns["te"].pytorch, name), type)
    with pytest.raises(ImportError, match="transformer-engine-absent"):
        ns["TELinear"](1, 2)
    assert p.new in _patched("transformer_engine.py.txt")


def test_no_program_of_the_run_imports_netifaces():
    import yaml

    fact = yaml.safe_load(IMPORTS.read_text())
    assert fact["scripts"][0]["sha"] == SHA
    modules = {m for s in fact["scripts"] for m in s["modules"]}
    assert "megatron.training" in modules and not any(m.split(".")[0] == "netifaces" for m in modules)
    assert "netifaces" in load_recipe("megatronapp").import_check  # the published one installs it
    recipe = load_recipe(RECIPE)
    assert recipe.package("netifaces") is None and "netifaces" not in recipe.import_check


def _words(script: str, section: str) -> list[str]:
    body = script.split(f'{section}="', 1)[1].split('"', 1)[0]
    return shlex.split(body.replace("\\\n", " "))


def test_rehearsal_is_the_example_scripts_training_with_pp2():
    script = excerpt("pretrain_gpt_distributed_small.sh.txt")
    values = dict(line.split("=", 1) for line in script.splitlines()
                  if "=" in line and line[:1].isupper() and " " not in line.split("=", 1)[0])
    published = []
    for section in ("GPT_ARGS", "DATA_ARGS", "OUTPUT_ARGS"):
        published += [values.get(w[1:], w) if w.startswith("$") else w for w in _words(script, section)]
    tail = script.split("pretrain_gpt.py", 1)[1]
    published += [values.get(w[1:], w) if w.startswith("$") else w for w in shlex.split(tail.replace("\\\n", " "))
                  if not w.endswith("_ARGS")]
    assert values["PIPELINE_MP_SIZE"] == "4" and values["GPUS_PER_NODE"] == "4"
    command = load_recipe(RECIPE).benchmark.variants["pp2-no-interleave"]
    rehearsal = shlex.split(command.split("pretrain_gpt.py", 1)[1])
    launcher = shlex.split(command.split("&&")[-1].split("pretrain_gpt.py")[0])
    assert launcher[:3] == ["python", "-m", "torch.distributed.run"] and launcher[launcher.index("--nproc_per_node") + 1] == "2"

    def pairs(words: list[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for i, w in enumerate(words):
            if w.startswith("--"):
                nxt = words[i + 1] if i + 1 < len(words) else None
                out[w] = None if nxt is None or nxt.startswith("--") else nxt
        return out

    want = pairs(published)
    assert want.pop("--num-layers-per-virtual-pipeline-stage") == values["VIRTUAL_STAGE_LAYER"]
    want["--pipeline-model-parallel-size"] = "2"
    assert pairs(rehearsal) == want
    # why: the interleaved schedule asserts PP > 2 (Megatron/megatron/arguments.py:151-154)
    assert "assert args.pipeline_model_parallel_size > 2" in excerpt("arguments.py.txt")
    assert command.startswith("bash script/benchmark.sh setup v4 && cd Megatron && rm -rf ngc_models/release_gpt_base")


def test_import_proof_names_the_patch_that_removes_a_reached_import():
    """A venv's CPU import proof does not apply patches: an import of the entry script that
    reaches transformer_engine (megatron.arguments -> ... -> custom_layers/transformer_engine.py)
    is left out naming te-absent-stand-in, not counted as unproven; another missing module is."""
    from envbuild.testbed.importproof import StandIns, judge

    recipe = load_recipe(RECIPE)
    script = {"component": "megatronapp", "path": "Megatron/pretrain_gpt.py", "optional": [],
              "modules": ["megatron.arguments", "megatron.training"]}
    results = {"Megatron/pretrain_gpt.py": {
        "megatron.arguments": {"ok": False, "missing": "transformer_engine",
                               "error": "ModuleNotFoundError: No module named 'transformer_engine'"},
        "megatron.training": {"ok": False, "missing": "einops", "error": "ModuleNotFoundError: No module named 'einops'"}}}
    verdict = judge(recipe, {"Megatron/pretrain_gpt.py": script}, results, stand=StandIns(), unbuilt={},
                    checked_out={"megatronapp"})
    (left,) = verdict.left
    assert left.what == "megatron.arguments" and "te-absent-stand-in" in left.why
    assert "custom_layers/transformer_engine.py" in left.why
    assert verdict.unproven == [
        "Megatron/pretrain_gpt.py: import megatron.training: ModuleNotFoundError: No module named 'einops'"]
