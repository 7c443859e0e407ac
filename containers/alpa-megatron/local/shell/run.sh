#!/usr/bin/env bash
# Provision alpa-megatron on local (host local, facts profile:local),
# rendered by envbuild 0.1.0 from the plan; lock digest 19b750f1b2268cdb69ca49ef1813846126039265fe3cf4b7ef074abccbad42f6.
# Regenerate: envbuild render alpa-megatron --target local --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  sh -c 'echo "preflight refused this node: $1" >&2; exit 1' sh 'nvcc-missing: no nvcc on local, but megatron JIT-compiles Megatron fused kernels at startup; apex is built with --cuda_ext; python-absent: Python 3.8 is not on local (found: 3.11.2) and there is no conda/mamba to create it; too-few-gpus: the benchmark needs 1 GPU(s) per node; local has 0'
}

# step system-packages: System packages
# why: native prerequisites named by the published instructions
step_system_packages() {
  env DEBIAN_FRONTEND=noninteractive apt-get update -q
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends make g++
}

# step environment: venv environment, Python 3.8
# why: recipe asks for Python 3.8; no matching interpreter in the node facts: the executor must find
# why: one
step_environment() {
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/state
  rm -f /root/.envbuild/envs/alpa-megatron/pyvenv.cfg /root/.envbuild/envs/alpa-megatron/bin/python /root/.envbuild/envs/alpa-megatron/bin/python3 /root/.envbuild/envs/alpa-megatron/bin/python3.8
  python3.8 -m venv /root/.envbuild/envs/alpa-megatron
  /root/.envbuild/envs/alpa-megatron/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==23.0.1, setuptools==59.5.0, wheel==0.45.1
# why: newest pip release admitted by the recipe's pip<23.1; setuptools pinned by the recipe; apex
# why: built with --no-build-isolation: setuptools < 70.1 needs the wheel package (< 0.46) for
# why: bdist_wheel and editable installs; without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/requirements && cat > /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_01b14c89ead8' && chmod 0644 /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-tooling.txt
pip==23.0.1 --hash=sha256:236bcb61156d76c4b8a05821b988c7b8c35bf0da28a4b614e8d6ab5212c25c6f
setuptools==59.5.0 --hash=sha256:6d10741ff20b89cd8c6a536ee9dc90d3002dec0226c78fb98605bfb9ef8a7adf
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_01b14c89ead8
  /root/.envbuild/envs/alpa-megatron/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:torch: torch 1.8.2+cu111
# why: torch from the index that carries the variant matched to this node; without a hash in the lock:
# why: torch
step_pip_torch() {
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/requirements && cat > /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-torch-unverified.txt <<'ENVBUILD_EOF_3d88385f0fa9' && chmod 0644 /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-torch-unverified.txt
torch==1.8.2+cu111
ENVBUILD_EOF_3d88385f0fa9
  /root/.envbuild/envs/alpa-megatron/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-torch-unverified.txt --no-deps --find-links=https://download.pytorch.org/whl/lts/1.8/torch_lts.html
}

# step pip:packages: 6 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/requirements && cat > /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_e7d387dc5fa3' && chmod 0644 /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-packages.txt
ninja==1.10.2 --hash=sha256:431cdf623d1effe4a797b8102f0fe8598fbb7243ba1b8bc43e54320e6e6b0c13
numpy==1.21.4 --hash=sha256:4c9c23158b87ed0e70d9a50c67e5c0b3f75bcf2581a8e34668d4e9d7474d76c6
pybind11==2.8.1 --hash=sha256:4ecbc2a0d4d1f3636edd8296705cc164991b704f3389ebcfa52986a0101f913b
regex==2021.11.10 --hash=sha256:85bfa6a5413be0ee6c5c4a663668a2cad2cbecdee367630d097d7823041bdeec
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
typing-extensions==3.10.0.2 --hash=sha256:f1d25edafde516b146ecd0613dabcc61409817af4766fbbcfb8d1ad4ec441a34
ENVBUILD_EOF_e7d387dc5fa3
  /root/.envbuild/envs/alpa-megatron/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/alpa-megatron/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:megatron: megatron @ c28bbd208d16
# why: The baseline itself: NVIDIA b31e129 + 55fd45c, d71f762, c28bbd2 (Hao Zhang). The tree has no
# why: setup.py/requirements.txt (deleted upstream in 6c00f448, an ancestor), so it goes on sys.path
# why: through a .pth entry, like the artifact's PYTHONPATH; the checkout stays writable because fused
# why: kernels are JIT-built into megatron/fused_kernels/build.
step_git_megatron() {
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatron.json"
}

# step patch:tie-embedding-disabled: patch tie-embedding-disabled
# why: Documents the baseline's one behavioural change: in train_step() the embedding-group all-reduce
# why: of word-embedding gradients is guarded by share_word_embeddings AND-ed with a literal False, so
# why: the first and last pipeline stages' embedding copies drift apart after the first update (initial
# why: weights are still synchronised). Alpa: "very little performance impact". Checked against the
# why: zhisbug mirror at c28bbd2.
step_patch_tie_embedding_disabled() {
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-tie-embedding-disabled.json"
}

# step install:megatron: install megatron (pth)
# why: no setup.py at this commit: a .pth entry puts the tree on sys.path
step_install_megatron() {
  /root/.envbuild/envs/alpa-megatron/bin/python -c 'import sys, sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['"'"'purelib'"'"'], '"'"'envbuild-'"'"' + sys.argv[1] + '"'"'.pth'"'"').write_text(sys.argv[2] + '"'"'\n'"'"')' megatron /root/.envbuild/envs/alpa-megatron/src/megatron
}

# step git:apex: apex @ e2083df5eb96
# why: Alpa cloned Apex unpinned. e2083df5 (2021-02-23) is the era commit with recorded use against a
# why: torch 1.x cu111 wheel and CUDA 11.1 nvcc (metaseq CI: torch 1.9.1+cu111, "because of apex issue
# why: #1252 we need to pin"); it has FusedAdam/FusedSGD, multi_tensor_apply and amp_C, which b31e129
# why: imports, and predates the Apex changes that dropped torch 1.x. --cuda_ext is required for amp_C.
step_git_apex() {
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step patch:apex-cuda-check: patch apex-cuda-check
# why: refused: CUDA extensions requested but no nvcc was found (torch wants CUDA 11.1)
step_patch_apex_cuda_check() {
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-apex-cuda-check.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex before pyproject.toml: build the wheel with `python setup.py bdist_wheel` in the tree
# why: (needs the wheel package and the installed torch), then pip install the wheel; 1 extension(s) x
# why: 1 job(s) x 1 nvcc thread(s) = 1 concurrent nvcc at ~3 GiB each within 0 of 4 GiB, keeping 4 GiB
# why: headroom (1 cores, 1 GPU arch(s); NVIDIA/apex#1882); below the ~24 GiB peak measured for a
# why: default build: expect a slow build or OOM, or build the wheel on a bigger node and reuse it
# why: (cache_key)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 1 ? $(nproc) : 1 ))" /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-e2083df5eb96-5f619726bbc75dc24fbb.json"
  /root/.envbuild/envs/alpa-megatron/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/alpa-megatron/.envbuild/wheels/apex-e2083df5eb96-5f619726bbc75dc24fbb apex
}

# step git:alpa: alpa @ e0ae8bf849ea
# why: The benchmark driver (osdi22_artifact/megatron/benchmark_gpt.py and benchmark_gpt_one_case.py:
# why: synthetic all-ones batches, --fp16 --loss-scale 8, DDP-impl local) and its TFLOPS formula in
# why: benchmark/util.py (imports only numpy); clone only, used from the checkout.
step_git_alpa() {
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/git-alpa.json"
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild && cat > /root/.envbuild/envs/alpa-megatron/.envbuild/env.sh <<'ENVBUILD_EOF_f73e6394476d' && chmod 0644 /root/.envbuild/envs/alpa-megatron/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/alpa-megatron
export PATH=/root/.envbuild/envs/alpa-megatron/bin:"$PATH"
ENVBUILD_EOF_f73e6394476d
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/alpa-megatron/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" megatron apex amp_C
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/alpa-megatron/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/alpa-megatron/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/alpa-megatron/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/alpa-megatron/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/alpa-megatron/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/alpa-megatron/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/alpa-megatron/.envbuild/smoke/apex_check.py
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/alpa-megatron/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight system-packages environment pip-tooling pip:torch pip:packages git:megatron patch:tie-embedding-disabled install:megatron git:apex patch:apex-cuda-check apex:apex git:alpa env-file import-check smoke)
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
