"""Every patch of every shipped recipe, applied to a tree of the shape it targets, and the result
compiles: Python with ``compile()``, C++ with ``g++ -fsyntax-only``.

Each tree holds the lines the patch reads, as they stand in the real file at the recipe's
pinned commit (read from the fetched repositories; the surrounding code is reduced to what
makes the file parse). What was read where:

* zhisbug/Megatron-LM@c28bbd20 megatron/training.py, train_step(): line 424
  ``if unwrapped_model.share_word_embeddings and False:`` (b31e1296, its base, has the same
  line without ``and False``, line 422);
* NVIDIA/apex@e2083df5 setup.py: check_cuda_torch_binary_vs_bare_metal(cuda_dir) (line 93)
  raises on ``(bare_metal_major != torch_binary_major) or (bare_metal_minor !=
  torch_binary_minor)``; called as ``check_cuda_torch_binary_vs_bare_metal(
  torch.utils.cpp_extension.CUDA_HOME)`` under --cuda_ext (line 171);
* OpenSQZ/MegatronApp@1bed2a72 shm_tensor_new_rdma.cpp: ``constexpr int NUM_GPUS = 4;``
  (line 25), the three-line ``std::string ips[] = {"192.168.0.2", ... "192.168.0.7"}; //
  infiniband IPs`` (lines 36-38, 8 entries), used as ``ips[rank] != ips[next_rank]`` and
  ``inet_pton(AF_INET, ips[next_rank].c_str(), &server_addr.sin_addr)``;
* OpenSQZ/MegatronApp@1bed2a72 setup.py: a CppExtension whose extra_compile_args list holds
  ``"-D_GLIBCXX_USE_CXX11_ABI=0",`` on a line of its own.

MegatronApp's address patch makes the extension read its list at run time (tests/
test_ib_addresses.py runs it); the plan-time placeholder ``{inventory.ib_addresses}`` is tested
here on the same file with tests/support/ib_inventory.planned_addresses_recipe, applied the way a node
applies it: from the plan's patch step, through envbuild.node.textpatch.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from envbuild.errors import CheckFailed, InputError
from envbuild.facts.profile import from_target
from envbuild.node.textpatch import apply_text_patch
from envbuild.patches.tree import apply_patch
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.plan.placeholders import inventory_values
from envbuild.recipes import all_recipes, load_recipe
from envbuild.targets import load_target
from support.ib_inventory import planned_addresses_recipe, with_ib

MEGATRON_TRAINING = '''\
import torch


def train_step(forward_step_func, data_iterator, model, optimizer, lr_scheduler):
    """Single training step."""
    args = get_args()
    if mpu.is_rank_in_embedding_group(ignore_virtual=True) and \\
            mpu.get_pipeline_model_parallel_world_size() > 1:
        unwrapped_model = model[0]
        rank = torch.distributed.get_rank()
        if rank == 0:
            print(">>>>>>>> No tie word embeddings.....")
        if unwrapped_model.share_word_embeddings{cond}:
            grad = unwrapped_model.word_embeddings_weight().grad
            torch.distributed.all_reduce(grad, group=mpu.get_embedding_group())
'''

APEX_SETUP = '''\
import subprocess
import sys

import torch
from torch.utils import cpp_extension


def get_cuda_bare_metal_version(cuda_dir):
    raw_output = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    output = raw_output.split()
    release = output[output.index("release") + 1].split(".")
    return raw_output, release[0], release[1][0]


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    raw_output, bare_metal_major, bare_metal_minor = get_cuda_bare_metal_version(cuda_dir)
    torch_binary_major = torch.version.cuda.split(".")[0]
    torch_binary_minor = torch.version.cuda.split(".")[1]

    if (bare_metal_major != torch_binary_major) or (bare_metal_minor != torch_binary_minor):
        raise RuntimeError("Cuda extensions are being compiled with a version of Cuda that does "
                           "not match the version used to compile Pytorch binaries.")


if "--cuda_ext" in sys.argv:
    sys.argv.remove("--cuda_ext")
    if torch.utils.cpp_extension.CUDA_HOME is None:
        raise RuntimeError("--cuda_ext was requested, but nvcc was not found.")
    else:
        check_cuda_torch_binary_vs_bare_metal(torch.utils.cpp_extension.CUDA_HOME)
'''

RDMA_CPP = '''\
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cstring>
#include <iostream>
#include <string>

constexpr int NUM_GPUS = 4; // number of gpus per node

std::string ips[] = {"192.168.0.2", "192.168.0.2", "192.168.0.2",
                     "192.168.0.2", "192.168.0.7", "192.168.0.7",
                     "192.168.0.7", "192.168.0.7"}; // infiniband IPs

void init_forward_rdma(int rank, int next_rank) {
  if (ips[rank] != ips[next_rank]) {
    sockaddr_in server_addr;
    std::memset(&server_addr, 0, sizeof(server_addr));
    server_addr.sin_family = AF_INET;
    server_addr.sin_port = htons(20000 + next_rank);
    inet_pton(AF_INET, ips[next_rank].c_str(), &server_addr.sin_addr);
    std::cout << "rank " << rank << " -> " << next_rank << " on gpu " << rank % NUM_GPUS << std::endl;
  }
}
'''

MEGATRONAPP_SETUP = '''\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

setup(
    name="shm_tensor_new_rdma",
    ext_modules=[
        CppExtension(
            name="shm_tensor_new_rdma",
            sources=["shm_tensor_new_rdma.cpp"],
            include_dirs=include_paths(),
            libraries=["rdmacm", "ibverbs", "torch", "torch_python", "c10"],
            extra_compile_args=[
                "-fPIC",
                "-std=c++17",
                "-D_GLIBCXX_USE_CXX11_ABI=0",
                "-I/usr/local/cuda/include"
            ],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
'''

# (recipe, patch id) -> (file in the tree, its text at the pinned commit, language)
TREES = {
    ("alpa-megatron", "tie-embedding-disabled"): ("megatron/training.py",
                                                  MEGATRON_TRAINING.format(cond=" and False"), "python"),
    ("alpa-megatron", "apex-cuda-check"): ("setup.py", APEX_SETUP, "python"),
    ("opt-175b-azure", "apex-cuda-check"): ("setup.py", APEX_SETUP, "python"),
    ("megatronapp", "ib-addresses"): ("shm_tensor_new_rdma.cpp", RDMA_CPP, "c++"),
    ("megatronapp", "cxx11-abi-from-torch"): ("setup.py", MEGATRONAPP_SETUP, "python"),
}
SHIPPED = ("alpa-megatron", "opt-175b-azure", "megatronapp", "polaris-megatron-deepspeed",
           "megatron-deepspeed-slurm", "cpu-reference")


def _gxx_syntax(path: Path) -> None:
    gxx = shutil.which("g++")
    assert gxx, "g++ is needed (build-essential, .ci/apt-packages.txt)"
    proc = subprocess.run([gxx, "-std=c++17", "-fsyntax-only", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _compiles(path: Path, lang: str) -> None:
    if lang == "python":
        compile(path.read_text(), str(path), "exec")
    else:
        _gxx_syntax(path)


def _tree(tmp_path: Path, key) -> tuple[Path, Path, str]:
    rel, text, lang = TREES[key]
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _compiles(path, lang)  # the tree itself is valid code before the patch
    return tmp_path, path, lang


def test_every_patch_of_the_five_setups_has_a_tree() -> None:
    patches = {(r.name, p.id) for r in all_recipes() if r.name in SHIPPED for p in r.patches}
    assert patches == set(TREES)


@pytest.mark.parametrize("key", list(TREES), ids="/".join)
def test_patch_applies_and_compiles(tmp_path, key) -> None:
    recipe, pid = key
    patch = next(p for p in load_recipe(recipe).patches if p.id == pid)
    root, path, lang = _tree(tmp_path, key)
    before = path.read_text()
    report = apply_patch(patch, root, apply=True, nvcc="11.4", torch_cuda="11.3")
    _compiles(path, lang)
    if patch.kind == "expect":
        assert report.status == "already-applied" and path.read_text() == before
    else:
        assert report.status == "applied" and path.read_text() != before
        again = apply_patch(patch, root, apply=True, nvcc="11.4", torch_cuda="11.3")
        assert again.status == "already-applied"  # idempotent on the node


def test_apex_check_keeps_the_major_and_drops_the_minor(tmp_path) -> None:
    patch = next(p for p in load_recipe("opt-175b-azure").patches if p.id == "apex-cuda-check")
    root, path, _ = _tree(tmp_path, ("opt-175b-azure", "apex-cuda-check"))
    apply_patch(patch, root, apply=True, nvcc="11.4", torch_cuda="11.3")
    text = path.read_text()
    assert "if bare_metal_major != torch_binary_major:" in text and "bare_metal_minor !=" not in text


def test_abi_patch_leaves_torch_to_set_the_abi(tmp_path) -> None:
    patch = next(p for p in load_recipe("megatronapp").patches if p.id == "cxx11-abi-from-torch")
    root, path, _ = _tree(tmp_path, ("megatronapp", "cxx11-abi-from-torch"))
    apply_patch(patch, root, apply=True)
    assert "_GLIBCXX_USE_CXX11_ABI=0" not in path.read_text().replace("# _GLIBCXX", "")
    assert '"-std=c++17",' in path.read_text()


def test_tie_embedding_expect_fails_on_the_upstream_base(tmp_path) -> None:
    """On b31e1296 (the branch's base) the literal False is absent: the expect patch refuses."""
    patch = next(p for p in load_recipe("alpa-megatron").patches if p.id == "tie-embedding-disabled")
    (tmp_path / "megatron").mkdir()
    (tmp_path / "megatron" / "training.py").write_text(MEGATRON_TRAINING.format(cond=""))
    with pytest.raises(CheckFailed, match="tie-embedding-disabled"):
        apply_patch(patch, tmp_path)


def _pod(host: str, address: str):
    return with_ib(from_target(load_target("rtx4090-pod")), address).model_copy(update={"host": host})


def _address_patch_step(nodes, inventory=True):
    rec, tgt = planned_addresses_recipe(), load_target("rtx4090-pod")
    opts = PlanOptions(backend="venv", host=nodes[0].host,
                       inventory=inventory_values(nodes) if inventory else None)
    plan = build_plan(rec, tgt, nodes[0], None, opts)
    return next(s for s in plan.steps if s.id == "patch:ib-addresses"), plan


def test_ib_addresses_from_two_pods_fill_eight_ranks_and_compile(tmp_path) -> None:
    step, plan = _address_patch_step([_pod("pod-0", "10.10.0.2"), _pod("pod-1", "10.10.0.7")])
    p = step.params
    assert "{" not in p.new
    assert p.new == ", ".join(['"10.10.0.2"'] * 4 + ['"10.10.0.7"'] * 4)
    assert any(d.subject == "patch:ib-addresses" and d.outcome == "filled" for d in plan.decisions)
    _, path, _ = _tree(tmp_path, ("megatronapp", "ib-addresses"))
    status, text = apply_text_patch(path.read_text(), p.patch_kind, p.old, p.new, p.count)
    assert status == "applied"
    # one address per rank, in rank order: the array has 8 entries and rank 4 is on the second pod
    path.write_text(text + '\nstatic_assert(sizeof(ips) / sizeof(ips[0]) == 8, "one address per rank");\n')
    _gxx_syntax(path)
    assert '"192.168.0.' not in text
    assert apply_text_patch(text, p.patch_kind, p.old, p.new, p.count)[0] == "already-applied"


def test_single_pod_without_an_inventory_is_its_own_inventory(tmp_path) -> None:
    step, _ = _address_patch_step([_pod("pod-0", "10.10.0.2")], inventory=False)
    assert step.params.new == ", ".join(['"10.10.0.2"'] * 4)


def test_unfilled_placeholder_is_refused_naming_patch_and_placeholder() -> None:
    rec, tgt = planned_addresses_recipe(), load_target("rtx4090-pod")
    node = from_target(tgt).model_copy(update={"host": "pod-0"})  # InfiniBand, no address known
    with pytest.raises(InputError) as err:
        build_plan(rec, tgt, node, None, PlanOptions(backend="venv"))
    msg = err.value.message
    assert "patch ib-addresses (megatronapp:shm_tensor_new_rdma.cpp)" in msg
    assert "{inventory.ib_addresses}" in msg and "pod-0 has no IPv4 address" in msg
    # one node of two without an address: the whole inventory is refused, not half filled
    nodes = [_pod("pod-0", "10.10.0.2"), node.model_copy(update={"host": "pod-1"})]
    with pytest.raises(InputError, match="pod-1 has no IPv4 address"):
        build_plan(rec, tgt, nodes[0], None, PlanOptions(backend="venv", inventory=inventory_values(nodes)))


def test_an_address_that_is_not_ipv4_never_reaches_the_source() -> None:
    bad = _pod("pod-0", '10.0.0.1", "x"); system("id')
    with pytest.raises(InputError, match="is not an IPv4 address"):
        _address_patch_step([bad])
