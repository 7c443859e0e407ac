"""Shape (d): packaging Version objects, parenthesized test (synthetic, after Oct 2022)."""
import os
import subprocess
import sys

from packaging.version import parse

CUDA_HOME = os.environ.get("CUDA_HOME")


def get_cuda_bare_metal_version(cuda_dir):
    raw_output = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    words = raw_output.split()
    return raw_output, parse(words[words.index("release") + 1].split(",")[0])


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    raw_output, bare_metal_version = get_cuda_bare_metal_version(cuda_dir)
    torch_binary_version = parse(os.environ["TORCH_CUDA"])

    if (bare_metal_version != torch_binary_version):
        raise RuntimeError(
            "nvcc reports CUDA {} but torch was built with CUDA {}".format(
                bare_metal_version, torch_binary_version)
        )


if "--cuda_ext" in sys.argv:
    sys.argv.remove("--cuda_ext")
    check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)
print("CHECK-PASSED")
