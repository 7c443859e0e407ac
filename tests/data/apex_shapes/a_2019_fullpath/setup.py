"""Shape (a): hard check of mid-2019, called with the full torch path (synthetic)."""
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
    bare_metal_major = release[0]
    bare_metal_minor = release[1][0]
    torch_binary_major = torch.version.cuda.split(".")[0]
    torch_binary_minor = torch.version.cuda.split(".")[1]

    if (bare_metal_major != torch_binary_major) or (bare_metal_minor != torch_binary_minor):
        raise RuntimeError("nvcc and the torch build disagree on CUDA: torch has {}".format(
            torch.version.cuda))


if "--cuda_ext" in sys.argv:
    sys.argv.remove("--cuda_ext")
    check_cuda_torch_binary_vs_bare_metal(torch.utils.cpp_extension.CUDA_HOME)
print("CHECK-PASSED")
