#!/usr/bin/env bash
# Provision h100-megatron-deepspeed on h100-venv (host h100-venv, facts profile:h100-venv),
# rendered by envbuild 0.1.0 from the plan; lock digest cf895a73248f6928070fbcc675113aa9eb2b6565ceb4a19c26e1164c21fb164e.
# Regenerate: envbuild render h100-megatron-deepspeed --target h100-venv --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  :  # nothing to do on this node
}

# step environment: venv environment, Python 3.12
# why: recipe asks for Python 3.12; --system-site-packages on top of the module's packages (published
# why: setup)
step_environment() {
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/state
  rm -f /root/.envbuild/envs/h100-megatron-deepspeed/pyvenv.cfg /root/.envbuild/envs/h100-megatron-deepspeed/bin/python /root/.envbuild/envs/h100-megatron-deepspeed/bin/python3 /root/.envbuild/envs/h100-megatron-deepspeed/bin/python3.12
  /usr/bin/python3.12 -m venv --system-site-packages /root/.envbuild/envs/h100-megatron-deepspeed
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==24.0, wheel==0.45.1
# why: pip pinned to 24.0 so build-option syntax is known; apex built with --no-build-isolation:
# why: setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and editable installs;
# why: without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_93b40a7a3b9c' && chmod 0644 /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-tooling.txt
pip==24.0 --hash=sha256:ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_93b40a7a3b9c
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:packages: 6 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_cc852d7bd27c' && chmod 0644 /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-packages.txt
annotated-types==0.7.0 --hash=sha256:1f02e8b43a8fbbc3f3e0d4f0f4bfc8131bcb4eebe8849b8e5c773f3a1c582a53
hjson==3.1.0 --hash=sha256:65713cdcf13214fb554eb8b4ef803419733f4f5e551047c9b711098ab7186b89
pydantic-core==2.46.3 --hash=sha256:fb528e295ed31570ac3dcc9bfdd6e0150bc11ce6168ac87a8082055cf1a67395
typing-inspection==0.4.2 --hash=sha256:4ed1cacbdc298c220f1bd249ed5287caa16f34d44ef4e9c3d0cbad5b521545e7
pydantic==2.13.3 --hash=sha256:6db14ac8dfc9a1e57f87ea2c0de670c251240f43cb0c30a5130e9720dc612927
ENVBUILD_EOF_cc852d7bd27c
  env DS_BUILD_OPS=0 DS_BUILD_FUSED_ADAM=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS="$(( $(nproc) < 8 ? $(nproc) : 8 ))" /root/.envbuild/envs/h100-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt <<'ENVBUILD_EOF_49d0d8b105b3' && chmod 0644 /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt
deepspeed==0.18.9
ENVBUILD_EOF_49d0d8b105b3
  env DS_BUILD_OPS=0 DS_BUILD_FUSED_ADAM=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS="$(( $(nproc) < 8 ? $(nproc) : 8 ))" /root/.envbuild/envs/h100-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt --no-build-isolation --no-deps
}

# step git:megatron-deepspeed: megatron-deepspeed @ e4bac7019db9
# why: The commit of ALCF/README.md (as polaris-megatron-deepspeed); clone only, the benchmark runs
# why: from its root.
step_git_megatron_deepspeed() {
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatron-deepspeed.json"
}

# step patch:wandb-optional: patch wandb-optional
# why: pretrain_gpt.py imports wandb at the top although megatron.training treats it as optional; the
# why: node has no wandb and no network (deviation ezpz-wandb-offline).
step_patch_wandb_optional() {
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-wandb-optional.json"
}

# step patch:ezpz-offline: patch ezpz-offline
# why: ezpz (and its git-only dependencies enrich, ambivalent) only finds ranks through MPI and sets up
# why: W&B; torchrun and Megatron's own initialization do the first, the second is off (deviation ezpz-
# why: wandb-offline).
step_patch_ezpz_offline() {
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-ezpz-offline.json"
}

# step patch:sample-idx-python: patch sample-idx-python
# why: The C++ build_sample_idx died with SIGSEGV on the H100 node (deviation dataset-helpers-numpy25);
# why: the same mapping from gpt_dataset.py's own Python function.
step_patch_sample_idx_python() {
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-sample-idx-python.json"
}

# step build:megatron-deepspeed: build megatron-deepspeed
# why: published build step for megatron-deepspeed
step_build_megatron_deepspeed() {
  (cd /root/.envbuild/envs/h100-megatron-deepspeed/src/megatron-deepspeed && env PATH=/root/.envbuild/envs/h100-megatron-deepspeed/bin:"$PATH" bash -ec 'python3 -c "import subprocess, sysconfig; subprocess.check_call(['"'"'make'"'"', '"'"'-C'"'"', '"'"'megatron/data'"'"', '"'"'LIBEXT='"'"' + sysconfig.get_config_var('"'"'EXT_SUFFIX'"'"')])"')
}

# step git:apex: apex @ 6424da3b4faa
# why: The module's Apex 52e18c89 cannot be built with nvcc 13 (deviation apex-52e18c89-cuda13).
# why: 6424da3b (2026-07-08) builds against torch 2.11.0+cu130 with nvcc 13.0 on this node type
# why: (bench/results/h100-apex-build.json: 12 extensions, sm_90 cubins, apex_check passed) and still
# why: has everything Megatron-DeepSpeed imports (apex.normalization FusedLayerNorm and
# why: MixedFusedRMSNorm, apex.optimizers FusedAdam, amp_C, multi_tensor_apply).
step_git_apex() {
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex 2026-07-08 reads APEX_* env vars (since 2025-07-22, bfb500c8); pyproject.toml -> --no-
# why: build-isolation so the build sees the installed torch; 4 extension(s) x 4 job(s) x 1 nvcc
# why: thread(s) = 16 concurrent nvcc at ~3 GiB each within 109 of 128 GiB, keeping 19 GiB headroom (16
# why: cores, 1 GPU arch(s); NVIDIA/apex#1882)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 4 ? $(nproc) : 4 ))" /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-6424da3b4faa-837967d631b5195728b8.json"
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/wheels/apex-6424da3b4faa-837967d631b5195728b8 apex
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild && cat > /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/env.sh <<'ENVBUILD_EOF_40127ff9f44f' && chmod 0644 /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/h100-megatron-deepspeed
export PATH=/root/.envbuild/envs/h100-megatron-deepspeed/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
export WANDB_MODE=disabled
ENVBUILD_EOF_40127ff9f44f
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch deepspeed deepspeed.ops.adam.fused_adam_op apex amp_C fused_layer_norm_cuda fused_weight_gradient_mlp_cuda
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/h100-megatron-deepspeed/.envbuild/smoke/apex_check.py
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  /root/.envbuild/envs/h100-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-native.json" || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:packages git:megatron-deepspeed patch:wandb-optional patch:ezpz-offline patch:sample-idx-python build:megatron-deepspeed git:apex apex:apex env-file import-check smoke)
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
