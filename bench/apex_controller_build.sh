#!/usr/bin/env bash
# Build the -h100 variants' Apex wheel (6424da3b, --cpp_ext --cuda_ext, sm_90) on a machine without a
# GPU, with CUDA from PyPI: the build the node's `apex:apex` step runs, against the same torch build.
#
#   bash bench/apex_controller_build.sh WORKDIR APEX_MIRROR     # APEX_MIRROR: a git mirror of NVIDIA/apex
#
# WORKDIR gets a Python 3.12 venv (PYTHON, default python3.12) with PyPI's torch 2.11.0 (its
# torch/version.py: 2.11.0+cu130, CUDA 13.0, the node's build) and nvcc 13.0.88 (the node's
# `nvcc -V`), a CUDA_HOME of links into its nvidia/cu13 folder, the apex checkout, and the wheel in
# WORKDIR/out. Pins that are not the toolkit's own defaults, and why (run 15's first attempt):
#   nvidia-nvvm and nvidia-cuda-crt 13.0.88  nvidia-cuda-nvcc 13.0.88 pulls them unpinned (13.5.37),
#                                            whose PTX ISA 9.5 the 13.0 ptxas refuses
#                                            ("Unsupported .version 9.5; current version is '9.0'")
#   nvidia-cuda-profiler-api 13.0            Megatron's softmax kernels include cuda_profiler_api.h
# The environment of the build is the planner's for the node (APEX_CPP_EXT, APEX_CUDA_EXT,
# TORCH_CUDA_ARCH_LIST=9.0) with jobs for this machine (MAX_JOBS, default 2). The cache key of the
# result is the node's (docs/benchmarks.md); bench/apex_check.py on a GPU node says whether it loads
# and computes (docs/results/h200-run15/controller-apex/). Exit: the build's; 2 usage.
set -euo pipefail
if [ -z "${1:-}" ] || [ ! -d "${2:-}" ]; then echo "usage: $0 WORKDIR APEX_MIRROR" >&2; exit 2; fi
WORK=$(realpath -m "$1"); MIRROR=$(realpath "$2")
APEX_SHA=6424da3b4faa6c8f062da4a48c424fff3f02d42d
mkdir -p "$WORK" && cd "$WORK"
[ -x venv/bin/python ] || "${PYTHON:-python3.12}" -m venv venv
venv/bin/python -m pip install -q --disable-pip-version-check torch==2.11.0 nvidia-cuda-nvcc==13.0.88 \
    nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 "nvidia-cuda-profiler-api>=13.0,<13.1" \
    "cuda-toolkit[nvcc,cudart,cccl,cublas,cusparse,curand,cusolver]==13.0.2" \
    setuptools==81.0.0 packaging==26.3 ninja==1.13.2 wheel==0.45.1 numpy==2.5.2
C=$(venv/bin/python -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13"))')
rm -rf cuda && mkdir -p cuda/lib64
ln -s "$C/bin" cuda/bin && ln -s "$C/include" cuda/include && ln -s "$C/nvvm" cuda/nvvm
for f in "$C"/lib/*.so*; do  # the libraries, and the unversioned names the linker asks for
  b=$(basename "$f"); ln -sfn "$f" "cuda/lib64/$b"; [ -e "cuda/lib64/${b%%.so*}.so" ] || ln -s "$f" "cuda/lib64/${b%%.so*}.so"
done
[ -d apex ] || git clone -q "$MIRROR" apex
git -C apex checkout -q "$APEX_SHA"
export CUDA_HOME=$PWD/cuda PATH=$PWD/cuda/bin:$PWD/venv/bin:$PATH
export APEX_CPP_EXT=1 APEX_CUDA_EXT=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=${MAX_JOBS:-2} APEX_PARALLEL_BUILD=1
"$CUDA_HOME/bin/nvcc" --version | tail -2
t0=$(date +%s)
(cd apex && ../venv/bin/python -m pip wheel --no-deps -w "$WORK/out" -v --no-cache-dir --no-build-isolation .) > build.log 2>&1
echo "built in $(( $(date +%s) - t0 )) s: $(ls "$WORK"/out/*.whl)"
sha256sum "$WORK"/out/*.whl
