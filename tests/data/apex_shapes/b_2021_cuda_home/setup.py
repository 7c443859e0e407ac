"""Shape (b): helper for the nvcc version, call with bare CUDA_HOME (synthetic)."""
import os
import subprocess
import sys

CUDA_HOME = os.environ.get("CUDA_HOME")
TORCH_CUDA = os.environ.get("TORCH_CUDA")


def get_cuda_bare_metal_version(cuda_dir):
    raw_output = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    tokens = raw_output.split()
    release = tokens[tokens.index("release") + 1].split(".")
    return raw_output, release[0], release[1][0]


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    raw_output, bare_metal_major, bare_metal_minor = get_cuda_bare_metal_version(cuda_dir)
    torch_binary_major = TORCH_CUDA.split(".")[0]
    torch_binary_minor = TORCH_CUDA.split(".")[1]

    if (bare_metal_major != torch_binary_major) or (bare_metal_minor != torch_binary_minor):
        raise RuntimeError(
            "CUDA of nvcc does not match the CUDA of the torch build "
            + "(torch: {}).".format(TORCH_CUDA)
        )


if "--cuda_ext" in sys.argv:
    sys.argv.remove("--cuda_ext")
    check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)
print("CHECK-PASSED")
