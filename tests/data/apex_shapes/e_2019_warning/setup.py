"""Shape (e): the first, warning-only check of early 2019 (synthetic)."""
import os
import subprocess
import sys
import types

torch = types.SimpleNamespace(
    version=types.SimpleNamespace(cuda=os.environ.get("TORCH_CUDA")),
    utils=types.SimpleNamespace(
        cpp_extension=types.SimpleNamespace(CUDA_HOME=os.environ.get("CUDA_HOME"))
    ),
)


def check_cuda_torch_binary_vs_bare_metal(cuda_dir):
    out = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    words = out.split()
    release = words[words.index("release") + 1].split(".")
    bare_metal_major, bare_metal_minor = release[0], release[1][0]
    torch_binary_major, torch_binary_minor = torch.version.cuda.split(".")[:2]
    if (bare_metal_major != torch_binary_major) or (bare_metal_minor != torch_binary_minor):
        print("Warning: nvcc CUDA differs from the CUDA torch was built with")


if "--cuda_ext" in sys.argv:
    sys.argv.remove("--cuda_ext")
    check_cuda_torch_binary_vs_bare_metal(torch.utils.cpp_extension.CUDA_HOME)
print("CHECK-PASSED")
