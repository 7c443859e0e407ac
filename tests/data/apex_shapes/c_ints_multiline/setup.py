"""Shape (c): integer major/minor, if-test spread over lines (synthetic)."""
import os
import re
import subprocess
import sys

CUDA_HOME = os.environ.get("CUDA_HOME")


def nvcc_release(cuda_dir):
    text = subprocess.run([os.path.join(cuda_dir, "bin", "nvcc"), "--version"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    major, minor = re.search(r"release (\d+)\.(\d+)", text).groups()
    return int(major), int(minor)


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    bare_metal_major, bare_metal_minor = nvcc_release(cuda_dir)
    torch_binary_major, torch_binary_minor = (int(x) for x in os.environ["TORCH_CUDA"].split(".")[:2])
    if (
        bare_metal_major != torch_binary_major
        or
        bare_metal_minor != torch_binary_minor
    ):
        raise RuntimeError("CUDA mismatch: nvcc %d.%d, torch %d.%d" % (
            bare_metal_major, bare_metal_minor, torch_binary_major, torch_binary_minor))


if "--cuda_ext" in sys.argv:
    check_cuda_torch_binary_vs_bare_metal(
        CUDA_HOME
    )
print("CHECK-PASSED")
