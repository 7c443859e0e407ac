"""A stand-in for NVIDIA Apex's setup.py of the 2021 era (synthetic; written for envbuild tests).

Shape kept from that era (facts, PINS.md): no pyproject.toml; build options arrive as extra
``sys.argv`` words (``--cpp_ext``, ``--cuda_ext``) that setup.py removes itself; ``--cuda_ext``
first compares nvcc's CUDA (from ``torch.utils.cpp_extension.CUDA_HOME``) with the CUDA torch
was built with, major AND minor, and raises on any difference. ``--cpp_ext`` builds the C++
extension ``apex_C``. The stand-in has no .cu sources: ``--cuda_ext`` runs the check only.

One departure, because no CUDA build of torch can be installed on the CPU test machine: when
``torch.version.cuda`` is None, the torch side of the check is read from
``$APEX_STANDIN_TORCH_CUDA`` (a test sets it to say "this torch was built for CUDA 12.1"), and
``CUDA_HOME`` (which a CPU torch always leaves None) from the environment.

``--fast_multihead_attn`` runs ``git submodule update --init`` for the cutlass submodule as
Apex's setup.py does, and fails when its header is not there (no CUDA sources are built).
"""
import os
import subprocess
import sys

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))


def get_cuda_bare_metal_version(cuda_dir):
    raw_output = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    words = raw_output.split()
    release = words[words.index("release") + 1].split(".")
    bare_metal_major = release[0]
    bare_metal_minor = release[1][0]
    return raw_output, bare_metal_major, bare_metal_minor


def torch_cuda_version():
    return torch.version.cuda or os.environ.get("APEX_STANDIN_TORCH_CUDA")


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    raw_output, bare_metal_major, bare_metal_minor = get_cuda_bare_metal_version(cuda_dir)
    torch_cuda = torch_cuda_version()
    torch_binary_major = torch_cuda.split(".")[0]
    torch_binary_minor = torch_cuda.split(".")[1]

    print("\nCompiling cuda extensions with")
    print(raw_output + "from " + cuda_dir + "/bin\n")

    if (bare_metal_major != torch_binary_major) or (bare_metal_minor != torch_binary_minor):
        raise RuntimeError(
            "Cuda extensions are being compiled with a version of Cuda that does not match the "
            "version used to compile Pytorch binaries. Pytorch binaries were compiled with Cuda "
            + torch_cuda + ", nvcc reports " + bare_metal_major + "." + bare_metal_minor + "."
        )


ext_modules = []

if "--cpp_ext" in sys.argv:
    sys.argv.remove("--cpp_ext")
    ext_modules.append(CppExtension("apex_C", [os.path.join("csrc", "flatten_unflatten.cpp")]))

if torch.version.cuda is None and torch.utils.cpp_extension.CUDA_HOME is None:
    # stand-in departure (README): a CPU torch leaves CUDA_HOME None; read it from the environment
    torch.utils.cpp_extension.CUDA_HOME = os.environ.get("CUDA_HOME")

if "--cuda_ext" in sys.argv:
    sys.argv.remove("--cuda_ext")
    if torch.utils.cpp_extension.CUDA_HOME is None:
        raise RuntimeError("--cuda_ext was requested, but nvcc was not found (CUDA_HOME unset)")
    check_cuda_torch_binary_vs_bare_metal(torch.utils.cpp_extension.CUDA_HOME)

if "--fast_multihead_attn" in sys.argv:
    # as Apex's setup.py of that era: the option needs the cutlass submodule, which it
    # initialises itself (offline this succeeds only when the checkout already holds it)
    sys.argv.remove("--fast_multihead_attn")
    subprocess.run(["git", "submodule", "update", "--init", "apex/contrib/csrc/multihead_attn/cutlass"],
                   check=False, cwd=HERE)
    if not os.path.exists(os.path.join(HERE, "apex", "contrib", "csrc", "multihead_attn", "cutlass", "cutlass.h")):
        raise RuntimeError("--fast_multihead_attn was requested, but the cutlass submodule is not checked out")

setup(
    name="apex",
    version="0.1",
    packages=find_packages(exclude=("csrc",)),
    description="envbuild test stand-in for PyTorch Extensions written by NVIDIA",
    ext_modules=ext_modules,
    cmdclass={"build_ext": BuildExtension} if ext_modules else {},
)
