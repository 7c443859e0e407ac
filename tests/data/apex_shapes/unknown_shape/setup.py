"""A check whose comparison no known Apex shape uses (synthetic)."""
import os
import subprocess
import sys

CUDA_HOME = os.environ.get("CUDA_HOME")


def same_cuda(a, b):
    return a.split(".")[:2] == b.split(".")[:2]


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    words = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True).split()
    nvcc = words[words.index("release") + 1].rstrip(",")
    if not same_cuda(nvcc, os.environ["TORCH_CUDA"]):
        raise RuntimeError("CUDA mismatch")


if "--cuda_ext" in sys.argv:
    check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)
print("CHECK-PASSED")
