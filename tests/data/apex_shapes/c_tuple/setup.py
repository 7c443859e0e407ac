"""Shape (c'): (major, minor) tuples compared in one go (synthetic)."""
import os
import re
import subprocess
import sys

CUDA_HOME = os.environ.get("CUDA_HOME")


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    text = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    nv = re.search(r"release (\d+)\.(\d+)", text).groups()
    th = tuple(os.environ["TORCH_CUDA"].split(".")[:2])
    if (nv[0], nv[1]) != (th[0], th[1]):
        raise RuntimeError("nvcc CUDA %s.%s differs from torch CUDA %s.%s" % (nv + th))


if "--cuda_ext" in sys.argv:
    check_cuda_torch_binary_vs_bare_metal(CUDA_HOME)
print("CHECK-PASSED")
