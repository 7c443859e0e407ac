"""Shape (d'): packaging Version, bare test, flags also from APEX_* env vars (synthetic)."""
import os
import subprocess
import sys

from packaging.version import parse

CUDA_HOME = os.environ.get("CUDA_HOME")


def wants(flag, env_var):
    return flag in sys.argv or os.environ.get(env_var, "0") == "1"


def get_cuda_bare_metal_version(cuda_dir):
    raw_output = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    words = raw_output.split()
    return raw_output, parse(words[words.index("release") + 1].split(",")[0])


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    raw_output, bare_metal_version = get_cuda_bare_metal_version(cuda_dir)
    torch_binary_version = parse(os.environ["TORCH_CUDA"])
    if bare_metal_version != torch_binary_version:
        raise RuntimeError("CUDA of nvcc ({}) is not the CUDA of torch ({})".format(
            bare_metal_version, torch_binary_version))


if wants("--cuda_ext", "APEX_CUDA_EXT"):
    check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)
print("CHECK-PASSED")
