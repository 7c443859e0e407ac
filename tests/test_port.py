"""``envbuild port`` end to end on the five published recipes: real git repositories made here,
holding at one commit just the files of each setup that the known fixes look at (with the
patterns the real trees have at their pinned commits, and some that must stay untouched), laid
out as a mirror folder (OWNER+NAME/repo, bare); each published recipe copied with its sources
pinned to those commits; the CLI run in-process. Asserted: the fix rows applied are exactly the
patterns present (never one that is absent, guarded or outside the setup's code), the variant
loads (`envbuild show`), and `envbuild check` finds it FEASIBLE on h100-venv or refuses only
what it left undecided."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from clirun import envbuild

from envbuild.facts.profile import from_target
from envbuild.port.stack import choose_stack
from envbuild.recipes import load_recipe
from envbuild.shipped import RECIPES
from envbuild.targets import load_target

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_AUTHOR_DATE="2022-03-10T12:00:00Z",
               GIT_COMMITTER_DATE="2022-03-10T12:00:00Z")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _repo(mirror: Path, slug: str, commits: list[tuple[dict[str, str], str | None]]) -> list[str]:
    """A bare mirror of ``slug`` (OWNER/NAME) with one commit per ``(files, tag)``: its SHAs."""
    work = mirror.parent / "work" / slug.replace("/", "+")
    work.mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=work)
    shas = []
    for files, tag in commits:
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        _git("add", "-A", cwd=work)
        _git("commit", "-q", "-m", tag or "published", cwd=work)
        if tag:
            _git("tag", tag, cwd=work)
        shas.append(_git("rev-parse", "HEAD", cwd=work))
    (mirror / slug.replace("/", "+")).mkdir(parents=True)
    _git("clone", "-q", "--bare", str(work), str(mirror / slug.replace("/", "+") / "repo"), cwd=mirror)
    return shas


# -- the trees: the files the fixes look at, as the pinned commits have them ---------------------

SIX = "import torch\nfrom torch._six import inf\n"
GUARDED_SIX = "try:\n    from torch._six import inf as inf\nexcept ModuleNotFoundError:\n    from torch import inf as inf\n"
INDEXED = "dtypes = {\n    6: np.float,\n    7: np.double,\n}\nelement_sizes = {\n    np.float: 4,\n}\n"
FUSED = ("import os\n\ndef load(args):\n    cc_flag = []\n\n"
         "    def _cpp_extention_load_helper(name, sources, extra_cuda_flags):\n"
         "        return cpp_extension.load(name=name, extra_cuda_cflags=['-O3',\n"
         "                               '-gencode', 'arch=compute_70,code=sm_70',\n"
         "                               '--use_fast_math'] + extra_cuda_flags + cc_flag)\n")
MEGATRON_B31E129 = {
    "megatron/optimizer/clip_grads.py": SIX,
    "megatron/data/indexed_dataset.py": INDEXED,
    "megatron/fused_kernels/__init__.py": FUSED,
    "megatron/training.py": "if unwrapped_model.share_word_embeddings and False:\n    pass\n",
    # outside the setup's code or never started by it: left alone
    "tests/test_clip.py": SIX,
    "examples/pretrain_gpt_distributed.sh": "python -m torch.distributed.launch $DISTRIBUTED_ARGS pretrain_gpt.py\n",
}
ALPA = {
    "osdi22_artifact/megatron/benchmark_gpt.py":
        "ret = run_cmd('python3 -m torch.distributed.launch '\n             f'--nproc_per_node {n} ')\n"
        "ret = run_cmd('python3 -m torch.distributed.launch '\n             f'--nnodes {m} ')\n",
    "osdi22_artifact/megatron/benchmark_gpt_one_case.py": "import numpy as np\n",
    "benchmark/megatron/benchmark_mlp.py": "ret = run_cmd('python3 -m torch.distributed.launch ')\n",
}
ARGONNE = {
    "megatron/optimizer/clip_grads.py": GUARDED_SIX,
    "megatron/model/transformer.py": "def f():\n    if x:\n            from pkg_resources import packaging\n",
    "pretrain_gpt.py": "import torch\n",
    "ALCF/train-gpt3.sh": "#!/bin/bash\nsource ALCF/launch.sh\n",
    "ALCF/launch.sh": "#!/bin/bash\nif [[ -n \"${SLURM_JOB_ID}\" ]]; then\n  echo slurm\nfi\n",
}
MICROSOFT_MDS = {
    "megatron/optimizer/clip_grads.py": SIX,
    "megatron/data/indexed_dataset.py": INDEXED,
    "pretrain_gpt.py": "import torch\n",
    "tools/preprocess_data.py": "import json\n",
}
DEEPSPEED = [
    ({"deepspeed/runtime/utils.py": SIX, "deepspeed/autotuning/scheduler.py": "from numpy import BUFSIZE\n"}, "v0.6.3"),
    ({"deepspeed/runtime/utils.py": "from torch import inf\n",
      "deepspeed/autotuning/scheduler.py": "BUFSIZE = 1\n",
      "deepspeed/elasticity/elastic_agent.py":
          "from torch.distributed.elastic.agent.server.api import log, _get_socket_with_port\n"}, "v0.10.3"),
    ({"deepspeed/elasticity/elastic_agent.py": "from torch.distributed.elastic.utils.distributed import get_free_port\n"},
     "v0.14.4"),
]
MEGATRONAPP = {
    "run_single.sh": "#!/bin/bash\nsed -i s/x/y/ examples/megatron4.0/pretrain_gpt_distributed_small.sh\n"
                     "bash examples/megatron4.0/pretrain_gpt_distributed_small.sh\n",
    "examples/megatron4.0/pretrain_gpt_distributed_small.sh": "cd Megatron\ntorchrun $DISTRIBUTED_ARGS pretrain_gpt.py \\\n  --x\n",
    "shm_tensor_new_rdma.cpp": "std::string ips[] = {\"10.0.0.1\", \"10.0.0.2\"}; // infiniband IPs\n"
                               "PYBIND11_MODULE(m, m) {\n  m.def(\"join_threads\", &join_threads);\n}\n",
    "setup.py": "from setuptools import setup\nargs = [\"-D_GLIBCXX_USE_CXX11_ABI=0\", \"-O3\"]\n",
    "Megatron/pretrain_gpt.py": "import torch\n",
    "Megatron/examples/pretrain_gpt.sh": "torchrun pretrain_gpt.py\n",  # not what the setup starts
}
METASEQ = {
    "metaseq/data/data_utils.py": "try:\n    from collections.abc import Iterable\nexcept ImportError:\n"
                                  "    from collections import Iterable\n",
    "metaseq/dataclass/configs.py": "from dataclasses import dataclass, field\n\n@dataclass\nclass MetaseqConfig:\n"
                                    "    common: CommonConfig = CommonConfig()\n"
                                    "    dataset: DatasetConfig = DatasetConfig()\n",
    "metaseq/dataclass/initialize.py": "def hydra_init():\n    for k in keys:\n"
                                       "        v = MetaseqConfig.__dataclass_fields__[k].default\n",
    "metaseq/launcher/opt_baselines.py": "import os\n",
    "metaseq/cli/train.py": "import torch\n",
}

# recipe -> {source: (slug, files)}, and the fix rows the trees hold: (row, component, file)
UNDECIDED = {
    "alpa-megatron": set(),
    "polaris-megatron-deepspeed": {"packages[3].version", "benchmark.command"},  # wandb of the conda module; PBS/Slurm
    "megatron-deepspeed-slurm": {"benchmark.command", "data[0]", "data[1]", "data[2]"},  # sbatch; downloads
    "megatronapp": {"sources[0].build", "packages[2].version"},  # the NGC image's rdma-core; its Transformer Engine
    "opt-175b-azure": {"sources[1]"},  # ngoyal2707/Megatron-LM fa6c0860 is in no mirror
}
SETUPS = {
    "alpa-megatron": ({"megatron": ("zhisbug/Megatron-LM", MEGATRON_B31E129), "alpa": ("alpa-projects/alpa", ALPA)}, {
        ("torch-six-inf", "megatron", "megatron/optimizer/clip_grads.py"),
        ("numpy-float-alias", "megatron", "megatron/data/indexed_dataset.py"),
        ("gencode-sm70", "megatron", "megatron/fused_kernels/__init__.py"),
        ("jit-modules-by-name", "megatron", "megatron/fused_kernels/__init__.py"),
        ("launch-to-run", "alpa", "osdi22_artifact/megatron/benchmark_gpt.py")}),
    "polaris-megatron-deepspeed": ({"megatron-deepspeed": ("argonne-lcf/Megatron-DeepSpeed", ARGONNE),
                                    "ezpz": ("saforem2/ezpz", {"src/ezpz/__init__.py": "import os\n"})}, {
        ("pkg-resources-packaging", "megatron-deepspeed", "megatron/model/transformer.py")}),
    "megatron-deepspeed-slurm": ({"megatron-deepspeed": ("microsoft/Megatron-DeepSpeed", MICROSOFT_MDS),
                                  "slurm-scripts": ("woojinsoh/Megatron-DeepSpeed-Slurm",
                                                    {"megatron_ds_snmg.slurm": "#SBATCH -N 1\nsrun python pretrain_gpt.py\n"})}, {
        ("torch-six-inf", "megatron-deepspeed", "megatron/optimizer/clip_grads.py"),
        ("numpy-float-alias", "megatron-deepspeed", "megatron/data/indexed_dataset.py"),
        ("torch-six-inf", "deepspeed", "deepspeed/runtime/utils.py"),
        ("numpy-bufsize", "deepspeed", "deepspeed/autotuning/scheduler.py")}),
    "megatronapp": ({"megatronapp": ("OpenSQZ/MegatronApp", MEGATRONAPP)}, {
        ("torchrun-of-the-env", "megatronapp", "examples/megatron4.0/pretrain_gpt_distributed_small.sh"),
        ("join-threads-releases-gil", "megatronapp", "shm_tensor_new_rdma.cpp")}),
    "opt-175b-azure": ({"metaseq": ("facebookresearch/metaseq", METASEQ),
                        "fairscale": ("facebookresearch/fairscale", {"fairscale/__init__.py": "__version__ = '0.4.13'\n"})}, {
        ("collections-abc-import", "metaseq", "metaseq/data/data_utils.py"),
        ("dataclass-default-factory", "metaseq", "metaseq/dataclass/configs.py"),
        ("hydra-init-default-factory", "metaseq", "metaseq/dataclass/initialize.py")}),
}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    """The mirror folder with every setup's trees; per recipe, its sources' test commits."""
    root = tmp_path_factory.mktemp("port") / "mirror"
    root.mkdir()
    _repo(root, "microsoft/DeepSpeed", DEEPSPEED)
    pins: dict[str, dict[str, str]] = {}
    for recipe, (sources, _) in SETUPS.items():
        pins[recipe] = {name: _repo(root, slug, [(files, None)])[0] for name, (slug, files) in sources.items()}
    return root, pins


def _published(recipe: str, pins: dict[str, str], where: Path) -> Path:
    """The shipped recipe with its sources pinned to the test trees (the rest as shipped)."""
    data = yaml.safe_load((RECIPES / f"{recipe}.yaml").read_text())
    for src in data.get("sources", []):
        if src["name"] in pins:
            src["sha"] = pins[src["name"]]
    path = where / f"{recipe}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _port(recipe: str, mirror, tmp_path: Path, *extra: str) -> tuple[dict, dict, Path]:
    _root, pins = mirror
    src = _published(recipe, pins[recipe], tmp_path)
    out = tmp_path / f"{recipe}-sm90.yaml"
    proc = envbuild("port", str(src), "--target", "h100-venv", *extra, "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), yaml.safe_load(out.read_text()), out


def _check(out: Path) -> tuple[int, set[str]]:
    proc = envbuild("check", str(out), "--target", "h100-venv", "--json")
    verdict = json.loads(proc.stdout)
    return proc.returncode, {v["rule"] for v in verdict["violations"] if v["severity"] == "error"}


@pytest.mark.parametrize("recipe", list(SETUPS))
def test_port_applies_fixes_only_where_the_pattern_is(recipe, mirror, tmp_path) -> None:
    res, variant, out = _port(recipe, mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert {(f["fix"], f["component"], f["file"]) for f in res["fixes"]} == SETUPS[recipe][1]
    assert variant["variant_of"] == recipe and variant["name"] == f"{recipe}-sm90"
    mine = {(q["component"], q["file"]) for q in variant["patches"] if q["id"].split("-")[0] in
            {f.split("-")[0] for f, _, _ in SETUPS[recipe][1]}}
    assert {(c, f) for _, c, f in SETUPS[recipe][1]} <= mine
    # every change is a deviation that names its code and its test, both real
    for d in variant["deviations"]:
        assert d["handled_by"] and d["test"] and d["problem"] and d["instead"] and d["source"]["url"], d["id"]
        for ref in d["handled_by"]:
            module, _, attr = ref.partition(":")
            assert hasattr(importlib.import_module(module), attr), ref
        for test in d["test"]:
            path, _, name = test.partition("::")
            assert f"def {name.split('[')[0]}(" in (ROOT / path).read_text(), test
    for fix, _, _ in SETUPS[recipe][1]:
        assert any(d["id"] == fix for d in variant["deviations"])
    shown = envbuild("show", str(out))
    assert shown.returncode == 0, shown.stderr
    rc, errors = _check(out)
    undecided = variant.get("undecided", [])
    assert {u["field"] for u in undecided} == UNDECIDED[recipe]
    if not undecided:
        assert rc == 0 and not errors
    else:  # check refuses the undecided entries, and rows each names
        named = {u["why"].split(":")[0].removeprefix("check row ") for u in undecided}
        assert rc == 1 and errors - {"recipe-undecided"} <= named


def test_port_uses_the_nodes_own_torch(mirror, tmp_path) -> None:
    _, variant, out = _port("alpa-megatron", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    torch = variant["packages"][0]
    assert (torch["name"], torch["version"], torch["preinstalled"]) == ("torch", "2.11.0", True)
    assert variant["python"] == "3.12"
    assert variant["environment"] == {"kind": "venv", "system_site_packages": True}
    numpy = next(p for p in variant["packages"] if p["name"] == "numpy")
    assert (numpy["version"], numpy["preinstalled"]) == ("2.5.2", True)
    assert _check(out) == (0, set())


def test_port_moves_apex_by_the_apex_rows(mirror, tmp_path) -> None:
    _, variant, _ = _port("opt-175b-azure", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    apex = next(s for s in variant["sources"] if s["install"] == "apex")
    assert apex["sha"] == "6424da3b4faa6c8f062da4a48c424fff3f02d42d"  # e2083df5 imports torch._six; 52e18c89: sm_70
    assert "--fast_multihead_attn" not in apex["build_options"] and "--cuda_ext" in apex["build_options"]
    dev = next(d for d in variant["deviations"] if d["id"] == "apex-e2083df5-to-6424da3b")
    assert "apex-torch-six" in dev["problem"] and "apex-cuda13-sm70" in dev["problem"]
    assert any(d["id"] == "apex-options-removed" for d in variant["deviations"])


def test_port_builds_the_apex_an_image_carried(mirror, tmp_path) -> None:
    _, variant, _ = _port("megatronapp", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert not any(p["name"] == "apex" for p in variant["packages"])
    apex = next(s for s in variant["sources"] if s["install"] == "apex")
    assert apex["sha"] == "6424da3b4faa6c8f062da4a48c424fff3f02d42d"
    assert apex["build_options"] == ["--cpp_ext", "--cuda_ext"]


def test_port_reads_a_package_at_its_release_tag(mirror, tmp_path) -> None:
    _, slurm, _ = _port("megatron-deepspeed-slurm", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    ds = next(s for s in slurm["sources"] if s["name"] == "deepspeed")  # 0.6.3 needs patches: built from v0.6.3
    assert (ds["ref"], ds["install"]) == ("v0.6.3", "wheel")
    assert not any(p["name"] == "deepspeed" for p in slurm["packages"])
    _, polaris, _ = _port("polaris-megatron-deepspeed", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    ds = next(p for p in polaris["packages"] if p["name"] == "deepspeed")  # 0.10.3 imports what torch 2.4 removed
    assert (ds["version"], ds.get("preinstalled", False)) == ("0.14.4", False)
    assert any(d["id"] == "deepspeed-elastic-agent" for d in polaris["deviations"])


def test_port_leaves_scheduler_launches_undecided(mirror, tmp_path) -> None:
    _, polaris, _ = _port("polaris-megatron-deepspeed", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert polaris["launcher"] == "local"
    why = next(u["why"] for u in polaris["undecided"] if u["field"] == "benchmark.command")
    assert "ALCF/launch.sh:2" in why and "SLURM_JOB" in why
    _, slurm, _ = _port("megatron-deepspeed-slurm", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    fields = {u["field"] for u in slurm["undecided"]}
    assert {"benchmark.command", "data[0]", "data[1]", "data[2]"} <= fields
    _, mapp, _ = _port("megatronapp", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert "two-pods" not in mapp.get("run", {}) and any(d["id"] == "pods-layouts" for d in mapp["deviations"])


def test_port_leaves_unstated_image_packages_undecided(mirror, tmp_path) -> None:
    _, polaris, _ = _port("polaris-megatron-deepspeed", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    i = next(i for i, p in enumerate(polaris["packages"]) if p["name"] == "wandb")
    assert any(u["field"] == f"packages[{i}].version" for u in polaris["undecided"])
    mpi = next(p for p in polaris["packages"] if p["name"] == "mpi4py")  # the node has it
    assert (mpi["version"], mpi["preinstalled"]) == ("4.1.2", True)


def test_port_without_a_mirror_lists_the_rows_it_could_not_check(mirror, tmp_path) -> None:
    res, variant, out = _port("alpa-megatron", mirror, tmp_path)
    assert res["fixes"] == [] and {"megatron", "alpa"} <= set(res["unread"])
    whys = {u["field"]: u["why"] for u in variant["undecided"]}
    assert {"sources[0]", "sources[2]"} <= set(whys)
    # and what check would then refuse, by its row: the fused kernels' arch list was not read
    assert whys["sources"].startswith("check row megatron-fused-kernels-arch")
    assert "no --git-mirror given" in whys["sources[0]"] and "torch-six-inf" in whys["sources[0]"]
    assert _check(out) == (1, {"recipe-undecided", "megatron-fused-kernels-arch"})


def test_port_of_a_source_missing_from_the_mirror_is_undecided(mirror, tmp_path) -> None:
    res, variant, _ = _port("opt-175b-azure", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert "megatron" in res["unread"]  # ngoyal2707/Megatron-LM is not in this mirror
    assert any(u["field"] == "sources[1]" and "no mirror of" in u["why"] for u in variant["undecided"])


def test_port_picks_the_closest_build_for_the_arch() -> None:
    alpa = load_recipe("alpa-megatron")
    h100 = load_target("h100")  # no torch of its own: a published build with sm_90, CUDA 13 for nvcc 13.0
    stack = choose_stack(alpa, h100, from_target(h100))
    assert (stack.torch, stack.cuda, stack.python, stack.node_own) == ("2.11.0", "cu130", "3.12", False)
    nd96 = load_target("azure-nd96")  # A100s (sm_80): torch 1.8.2+cu111 itself runs there
    stack = choose_stack(alpa, nd96, from_target(nd96))
    assert (stack.torch, stack.cuda) == ("1.8.2", "cu111")


def test_port_to_the_published_hardware_changes_nothing_it_need_not(tmp_path) -> None:
    out = tmp_path / "v.yaml"
    proc = envbuild("port", "alpa-megatron", "--target", "azure-nd96", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    variant = yaml.safe_load(out.read_text())
    assert variant["name"] == "alpa-megatron-sm80" and variant["python"] == "3.8"
    assert variant["resolve_as_of"] == "2021-11-12" and variant["packages"][0]["version"] == "1.8.2"
    assert not any(d["id"].startswith(("torch-", "apex-")) for d in variant["deviations"])


def test_port_needs_the_nodes() -> None:
    proc = envbuild("port", "alpa-megatron")
    assert proc.returncode == 2 and "--target T or --facts FILE" in proc.stderr


def test_port_to_a_nodes_facts_reads_its_torch_and_its_gpu_count(mirror, tmp_path) -> None:
    """--facts alone: the node's own torch from its pip list, judged as the local target; the
    published 4-GPU run on a 1-GPU node is left undecided by the check row that refuses it."""
    node = from_target(load_target("h100-venv")).model_copy(update={
        "host": "gpu1", "origin": "collected", "pip_packages": {"torch": "2.11.0", "numpy": "2.5.2", "pybind11": "3.1.0"}})
    facts = tmp_path / "node.json"
    facts.write_text(node.to_json())
    _root, pins = mirror
    src = _published("megatronapp", pins["megatronapp"], tmp_path)
    out = tmp_path / "v.yaml"
    proc = envbuild("port", str(src), "--facts", str(facts), "--git-mirror", str(mirror[0]), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    variant = yaml.safe_load(out.read_text())
    assert variant["targets"] == ["local"] and variant["packages"][0]["version"] == "2.11.0"
    assert any(p["name"] == "pybind11" and p["version"] == "3.1.0" and p["preinstalled"] for p in variant["packages"])
    gpus = next(u["why"] for u in variant["undecided"] if u["field"] == "benchmark.needs_gpus")
    assert gpus.startswith("check row too-few-gpus")
