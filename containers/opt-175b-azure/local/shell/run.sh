#!/usr/bin/env bash
# Provision opt-175b-azure on local (host local, facts profile:local),
# rendered by envbuild 0.1.0 from the plan; lock sha256 f14b67587fe3811b282e6f373623e8d247f02ea39afc155fa7934911fae20ad9.
# Regenerate: envbuild render opt-175b-azure --target local --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  sh -c 'echo "preflight refused this node: $1" >&2; exit 1' sh 'nvcc-missing: no nvcc on local, but apex is built with --cuda_ext; megatron JIT-compiles Megatron fused kernels at startup; cuda-ext-with-cpu-torch: torch 1.10.1+cpu is a CPU build (chosen because local has no GPU), but apex is built with --cuda_ext; megatron JIT-compiles Megatron fused kernels at startup; python-absent: Python 3.9 is not on local (found: 3.11.2) and there is no conda/mamba to create it; too-few-gpus: the benchmark needs 8 GPU(s) per node; local has 0'
}

# step environment: conda environment, Python 3.9
# why: recipe asks for Python 3.9; conda packages python=3.9
step_environment() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/state
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild && cp "$FILES/assets/conda/rattler_create.py" /root/.envbuild/envs/opt-175b-azure/.envbuild/rattler_create.py && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/rattler_create.py
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild
  python3 /root/.envbuild/envs/opt-175b-azure/.envbuild/rattler_create.py --prefix /root/.envbuild/envs/opt-175b-azure python=3.9 > /root/.envbuild/envs/opt-175b-azure/.envbuild/conda-packages.txt
  sh -c 'test -x "$1/bin/python" || { echo "$1/bin/python is missing after installing the conda packages from $3; add python=$2 to the conda specs or leave python out to use the node'"'"'s Python" >&2; exit 1; }' sh /root/.envbuild/envs/opt-175b-azure 3.9 conda-forge
}

# step pip-tooling: pip==23.0.1, setuptools==59.5.0, wheel==0.45.1
# why: newest pip release admitted by the recipe's pip<23.1; setuptools pinned by the recipe; apex,
# why: megatron, metaseq, fairscale built with --no-build-isolation: setuptools < 70.1 needs the wheel
# why: package (< 0.46) for bdist_wheel and editable installs; without it pip fails with "invalid
# why: command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements && cat > /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_01b14c89ead8' && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-tooling.txt
pip==23.0.1 --hash=sha256:236bcb61156d76c4b8a05821b988c7b8c35bf0da28a4b614e8d6ab5212c25c6f
setuptools==59.5.0 --hash=sha256:6d10741ff20b89cd8c6a536ee9dc90d3002dec0226c78fb98605bfb9ef8a7adf
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_01b14c89ead8
  /root/.envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:torch: torch 1.10.1+cpu
# why: torch from the index that carries the variant matched to this node; without a hash in the lock:
# why: torch
step_pip_torch() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements && cat > /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-torch-unverified.txt <<'ENVBUILD_EOF_0966b3e5f48f' && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-torch-unverified.txt
torch==1.10.1+cpu
ENVBUILD_EOF_0966b3e5f48f
  /root/.envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-torch-unverified.txt --no-deps --find-links=https://download.pytorch.org/whl/torch_stable.html
}

# step pip:packages: 4 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements && cat > /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_acad04d70357' && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-packages.txt
cython==0.29.33 --hash=sha256:4f88c2dc0653eef6468848eb8022faf64115b39734f750a1c01a7ba7eb04d89f
numpy==1.24.2 --hash=sha256:f64bb98ac59b3ea3bf74b02f13836eb2e24e48e0ab0145bbda646295769bd780
regex==2022.10.31 --hash=sha256:e4f781ffedd17b0b834c8731b75cce2639d5a8afe961c1e58ee7f1f20b3af185
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
ENVBUILD_EOF_acad04d70357
  /root/.envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:apex: apex @ e2083df5eb96
# why: The guide clones Apex master unpinned. e2083df5 is metaseq's own pin at a1a4e733 and 5ca60055
# why: (docs/Dockerfile with torch 1.10.1+cu113, CI with torch 1.9.1+cu111: "because of apex issue
# why: #1252 we need to pin"). --deprecated_fused_adam builds fused_adam_cuda, which metaseq's
# why: optim/fused_adam.py imports first; --xentropy and --fast_multihead_attn are the guide's flags
# why: (the latter fetches the cutlass submodule at build time).
step_git_apex() {
  if [ ! -d /root/.envbuild/envs/opt-175b-azure/src/apex/.git ]; then git clone --quiet --no-checkout https://github.com/NVIDIA/apex /root/.envbuild/envs/opt-175b-azure/src/apex; fi
  { git -C /root/.envbuild/envs/opt-175b-azure/src/apex cat-file -e 'e2083df5eb96643c61613b9df48dd4eea6b07690^{commit}' 2>/dev/null || git -C /root/.envbuild/envs/opt-175b-azure/src/apex fetch --quiet origin e2083df5eb96643c61613b9df48dd4eea6b07690; }
  git -C /root/.envbuild/envs/opt-175b-azure/src/apex -c advice.detachedHead=false checkout --quiet --force e2083df5eb96643c61613b9df48dd4eea6b07690
  { test "$(git -C /root/.envbuild/envs/opt-175b-azure/src/apex rev-parse HEAD)" = e2083df5eb96643c61613b9df48dd4eea6b07690 || { echo '/root/.envbuild/envs/opt-175b-azure/src/apex: HEAD is not e2083df5eb96643c61613b9df48dd4eea6b07690' >&2; exit 1; }; }
  git -C /root/.envbuild/envs/opt-175b-azure/src/apex submodule update --init -- apex/contrib/csrc/multihead_attn/cutlass
}

# step patch:apex-cuda-check: patch apex-cuda-check
# why: refused: CUDA extensions requested but torch is a CPU build (torch.version.cuda is None)
step_patch_apex_cuda_check() {
  python3 "$FILES/tools/apply_patch.py" --spec "$FILES/patch-specs/apex-cuda-check.json" --dest /root/.envbuild/envs/opt-175b-azure/src/apex --diff-dir /root/.envbuild/envs/opt-175b-azure/.envbuild/patches
}

# step apex:apex: build Apex wheel (apex)
# why: Apex before pyproject.toml: build the wheel with `python setup.py bdist_wheel` in the tree
# why: (needs the wheel package and the installed torch), then pip install the wheel; 1 extension(s) x
# why: 1 job(s) x 1 nvcc thread(s) = 1 concurrent nvcc at ~3 GiB each within 0 of 4 GiB, keeping 4 GiB
# why: headroom (1 cores, 1 GPU arch(s); NVIDIA/apex#1882); below the ~24 GiB peak measured for a
# why: default build: expect a slow build or OOM, or build the wheel on a bigger node and reuse it
# why: (cache_key)
step_apex_apex() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/wheels/apex-e2083df5eb96-2669734395cc8a747d0e
  (cd /root/.envbuild/envs/opt-175b-azure/src/apex && env MAX_JOBS=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PATH=/root/.envbuild/envs/opt-175b-azure/bin:"$PATH" /root/.envbuild/envs/opt-175b-azure/bin/python setup.py --cpp_ext --cuda_ext --deprecated_fused_adam --xentropy --fast_multihead_attn bdist_wheel -d /root/.envbuild/envs/opt-175b-azure/.envbuild/wheels/apex-e2083df5eb96-2669734395cc8a747d0e)
  /root/.envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/opt-175b-azure/.envbuild/wheels/apex-e2083df5eb96-2669734395cc8a747d0e apex
}

# step git:megatron: megatron @ fa6c0860b62e
# why: The guide's Megatron fork and branch. No snapshot of fairseq_v3 exists to read its head;
# why: fa6c0860 is the best-evidenced fairseq_v3 commit (metaseq's 2023 port of these files cites it,
# why: and a third-party Dockerfile checks it out after cloning --branch fairseq_v3). Pinned so the
# why: build is repeatable; `envbuild lock` verifies it against the mirror. Editable because fused
# why: kernels JIT-compile into megatron/fused_kernels/build.
step_git_megatron() {
  if [ ! -d /root/.envbuild/envs/opt-175b-azure/src/megatron/.git ]; then git clone --quiet --no-checkout https://github.com/ngoyal2707/Megatron-LM /root/.envbuild/envs/opt-175b-azure/src/megatron; fi
  { git -C /root/.envbuild/envs/opt-175b-azure/src/megatron cat-file -e 'fa6c0860b62e4ed2ac13a513e7d950d72f576a44^{commit}' 2>/dev/null || git -C /root/.envbuild/envs/opt-175b-azure/src/megatron fetch --quiet origin fa6c0860b62e4ed2ac13a513e7d950d72f576a44; }
  git -C /root/.envbuild/envs/opt-175b-azure/src/megatron -c advice.detachedHead=false checkout --quiet --force fa6c0860b62e4ed2ac13a513e7d950d72f576a44
  { test "$(git -C /root/.envbuild/envs/opt-175b-azure/src/megatron rev-parse HEAD)" = fa6c0860b62e4ed2ac13a513e7d950d72f576a44 || { echo '/root/.envbuild/envs/opt-175b-azure/src/megatron: HEAD is not fa6c0860b62e4ed2ac13a513e7d950d72f576a44' >&2; exit 1; }; }
}

# step install:megatron: install megatron (editable)
# why: editable install: the tree stays writable (JIT kernels build into it)
step_install_megatron() {
  /root/.envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation -e /root/.envbuild/envs/opt-175b-azure/src/megatron
}

# step git:metaseq: metaseq @ 5ca6005552b7
# why: The guide pins a1a4e733 (2022-08-09, "Do not save checkpoint in benchmark mode"), which predates
# why: metaseq's switch to Megatron fairseq_v3. 5ca60055 (2022-10-28, PR #460) is the commit that
# why: switches to fairseq_v3; it is 88 commits after a1a4e733 and contains it (checked by
# why: requires_ancestors), so --benchmark still implies --no-save. Its CI builds it with the same Apex
# why: e2083df5. build_ext --inplace puts the Cython .so files in the tree, which opt-baselines' code
# why: snapshot copies. install_requires lists `sklearn`, which needs the brownout variable to install.
step_git_metaseq() {
  if [ ! -d /root/.envbuild/envs/opt-175b-azure/src/metaseq/.git ]; then git clone --quiet --no-checkout https://github.com/facebookresearch/metaseq /root/.envbuild/envs/opt-175b-azure/src/metaseq; fi
  { git -C /root/.envbuild/envs/opt-175b-azure/src/metaseq cat-file -e '5ca6005552b7a049f071754393d5b86185e0db6a^{commit}' 2>/dev/null || git -C /root/.envbuild/envs/opt-175b-azure/src/metaseq fetch --quiet origin 5ca6005552b7a049f071754393d5b86185e0db6a; }
  git -C /root/.envbuild/envs/opt-175b-azure/src/metaseq -c advice.detachedHead=false checkout --quiet --force 5ca6005552b7a049f071754393d5b86185e0db6a
  { test "$(git -C /root/.envbuild/envs/opt-175b-azure/src/metaseq rev-parse HEAD)" = 5ca6005552b7a049f071754393d5b86185e0db6a || { echo '/root/.envbuild/envs/opt-175b-azure/src/metaseq: HEAD is not 5ca6005552b7a049f071754393d5b86185e0db6a' >&2; exit 1; }; }
}

# step build:metaseq: build metaseq
# why: published build step for metaseq
step_build_metaseq() {
  (cd /root/.envbuild/envs/opt-175b-azure/src/metaseq && env SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL=True PATH=/root/.envbuild/envs/opt-175b-azure/bin:"$PATH" bash -ec 'python setup.py build_ext --inplace')
}

# step install:metaseq: install metaseq (editable)
# why: editable install: the tree stays writable (JIT kernels build into it)
step_install_metaseq() {
  /root/.envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation -e /root/.envbuild/envs/opt-175b-azure/src/metaseq
}

# step git:fairscale: fairscale @ 191553190d73
# why: The guide's branch, installed non-editable as the guide says. Head 19155319 (2022-05-11) =
# why: v0.4.6 + 5 commits; reports version 0.4.6 either way (the version tuple is tracked), which
# why: satisfies metaseq's string comparisons in trainer.py.
step_git_fairscale() {
  if [ ! -d /root/.envbuild/envs/opt-175b-azure/src/fairscale/.git ]; then git clone --quiet --no-checkout https://github.com/facebookresearch/fairscale /root/.envbuild/envs/opt-175b-azure/src/fairscale; fi
  { git -C /root/.envbuild/envs/opt-175b-azure/src/fairscale cat-file -e '191553190d73a5ef4a48687c889d4b1d94532135^{commit}' 2>/dev/null || git -C /root/.envbuild/envs/opt-175b-azure/src/fairscale fetch --quiet origin 191553190d73a5ef4a48687c889d4b1d94532135; }
  git -C /root/.envbuild/envs/opt-175b-azure/src/fairscale -c advice.detachedHead=false checkout --quiet --force 191553190d73a5ef4a48687c889d4b1d94532135
  { test "$(git -C /root/.envbuild/envs/opt-175b-azure/src/fairscale rev-parse HEAD)" = 191553190d73a5ef4a48687c889d4b1d94532135 || { echo '/root/.envbuild/envs/opt-175b-azure/src/fairscale: HEAD is not 191553190d73a5ef4a48687c889d4b1d94532135' >&2; exit 1; }; }
}

# step install:fairscale: install fairscale (wheel)
# why: non-editable install, as the published instructions require
step_install_fairscale() {
  /root/.envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/opt-175b-azure/src/fairscale
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild && cat > /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh <<'ENVBUILD_EOF_62afe8ea1d07' && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/opt-175b-azure
export PATH=/root/.envbuild/envs/opt-175b-azure/bin:"$PATH"
ENVBUILD_EOF_62afe8ea1d07
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/opt-175b-azure/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch apex amp_C fused_adam_cuda xentropy_cuda megatron fairscale metaseq
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/apex_check.py
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke && if [ -f /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh ]; then . /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh; fi && timeout 1800 /root/.envbuild/envs/opt-175b-azure/bin/python /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.py --json --preset tiny) > /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.out 2> /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke && if [ -f /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh ]; then . /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh; fi && timeout 1800 /root/.envbuild/envs/opt-175b-azure/bin/python /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.out 2> /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.err' >&2; fi
  mkdir -p /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke && if [ -f /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh ]; then . /root/.envbuild/envs/opt-175b-azure/.envbuild/env.sh; fi && timeout 1800 /root/.envbuild/envs/opt-175b-azure/bin/python /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/apex_check.py --json --require) > /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/apex.out 2> /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/apex.err || rc=$?
  echo "$rc" > /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/apex.rc
  if [ "$rc" != 0 ]; then failed="$failed apex(exit $rc)"; echo 'apex failed, see /root/.envbuild/envs/opt-175b-azure/.envbuild/smoke/apex.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:torch pip:packages git:apex patch:apex-cuda-check apex:apex git:megatron install:megatron git:metaseq build:metaseq install:metaseq git:fairscale install:fairscale env-file import-check smoke)
if [ "$#" -gt 0 ]; then STEPS=("$@"); fi
n=0
for id in "${STEPS[@]}"; do
  n=$((n + 1))
  fn="step_${id//[^a-zA-Z0-9]/_}"
  if ! declare -F "$fn" >/dev/null; then echo "no step $id" >&2; exit 2; fi
  echo "==> [$n/${#STEPS[@]}] $id"
  "$fn"
done
echo "==> done"
