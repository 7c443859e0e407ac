#!/usr/bin/env bash
# Provision polaris-megatron-deepspeed on polaris (host polaris, facts profile:polaris),
# rendered by envbuild 0.1.0 from the plan; lock sha256 180387091588f93419557775ad75a7ba90674e88b5b38a345c3208f323761603.
# Regenerate: envbuild render polaris-megatron-deepspeed --target polaris --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  :  # nothing to do on this node
}

# step environment: module-venv environment, Python 3.10
# why: recipe asks for Python 3.10; --system-site-packages on top of the module's packages (published
# why: setup)
step_environment() {
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/state
  bash -c 'module load "$1" && shift && exec "$@"' bash conda/2023-10-04 /usr/bin/python3.10 -m venv --system-site-packages /root/.envbuild/envs/polaris-megatron-deepspeed
}

# step pip-tooling: wheel==0.45.1
# why: ezpz built with --no-build-isolation: setuptools < 70.1 needs the wheel package (< 0.46) for
# why: bdist_wheel and editable installs; without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_047bed16ca65' && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-tooling.txt
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_047bed16ca65
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:packages: 2 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_bdb08fb7c69f' && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages.txt
einops==0.7.0 --hash=sha256:0f3096f26b914f465f6ff3c66f5478f9a5e380bb367ffc6493a68143fbbf1fd1
ENVBUILD_EOF_bdb08fb7c69f
  env FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS=8 /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt <<'ENVBUILD_EOF_e155264da1af' && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt
flash-attn==2.4.2
ENVBUILD_EOF_e155264da1af
  env FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS=8 /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt --no-build-isolation --no-deps
}

# step git:megatron-deepspeed: megatron-deepspeed @ e4bac7019db9
# why: The commit where ALCF/README.md with this recipe's steps was written (scripts call
# why: pretrain_gpt.py). f51f1fa1 (2024-02-01) is the last commit with the same layout but renames the
# why: entry script to pretrain_gpt_alcf.py, which the README does not mention. Clone only: the scripts
# why: source ALCF/*.sh by relative path and run from the repo root.
step_git_megatron_deepspeed() {
  if [ ! -d /root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed/.git ]; then git clone --quiet --no-checkout https://github.com/argonne-lcf/Megatron-DeepSpeed /root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed; fi
  { git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed cat-file -e 'e4bac7019db92cfe49d6eeac00b5721652e516fe^{commit}' 2>/dev/null || git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed fetch --quiet origin e4bac7019db92cfe49d6eeac00b5721652e516fe; }
  git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed -c advice.detachedHead=false checkout --quiet --force e4bac7019db92cfe49d6eeac00b5721652e516fe
  { test "$(git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed rev-parse HEAD)" = e4bac7019db92cfe49d6eeac00b5721652e516fe || { echo '/root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed: HEAD is not e4bac7019db92cfe49d6eeac00b5721652e516fe' >&2; exit 1; }; }
}

# step git:ezpz: ezpz @ ae490bd966be
# why: `pip install git+https://github.com/saforem2/ezpz` in the README; ae490bd9 (2024-01-28) is the
# why: commit contemporary with it (hatchling, provides ezpz.dist setup_torch / get_world_size /
# why: setup_wandb / get_rank). PyPI's "ezpz" is an unrelated 2016 package, so never by name.
step_git_ezpz() {
  if [ ! -d /root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz/.git ]; then git clone --quiet --no-checkout https://github.com/saforem2/ezpz /root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz; fi
  { git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz cat-file -e 'ae490bd966be99cb2327a5f6da0c9c3b48456e65^{commit}' 2>/dev/null || git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz fetch --quiet origin ae490bd966be99cb2327a5f6da0c9c3b48456e65; }
  git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz -c advice.detachedHead=false checkout --quiet --force ae490bd966be99cb2327a5f6da0c9c3b48456e65
  { test "$(git -C /root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz rev-parse HEAD)" = ae490bd966be99cb2327a5f6da0c9c3b48456e65 || { echo '/root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz: HEAD is not ae490bd966be99cb2327a5f6da0c9c3b48456e65' >&2; exit 1; }; }
}

# step install:ezpz: install ezpz (wheel)
# why: non-editable install, as the published instructions require
step_install_ezpz() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/polaris-megatron-deepspeed/src/ezpz
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild && cat > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh <<'ENVBUILD_EOF_216eb20a7314' && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/polaris-megatron-deepspeed
export PATH=/root/.envbuild/envs/polaris-megatron-deepspeed/bin:"$PATH"
ENVBUILD_EOF_216eb20a7314
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch deepspeed apex flash_attn einops ezpz
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke && if [ -f /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh ]; then . /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh; fi && timeout 1800 /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/gpt.py --json --preset tiny) > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/gpt.out 2> /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke && if [ -f /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh ]; then . /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh; fi && timeout 1800 /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/collective.out 2> /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/collective.err' >&2; fi
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /root/.envbuild/envs/polaris-megatron-deepspeed/src/megatron-deepspeed && if [ -f /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh ]; then . /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/env.sh; fi && env MODEL_SIZE_KEY=GPT25B SEQ_LEN=4096 USE_FLASH_ATTN_V2=1 MICRO_BATCH=1 GAS=1 SP_TYPE=megatron ZERO_STAGE=1 timeout 3600 bash -c ./ALCF/train-gpt3.sh) > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/native.out 2> /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/native.err || rc=$?
  echo "$rc" > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/native.rc
  if [ "$rc" != 0 ]; then failed="$failed native(exit $rc)"; echo 'native failed, see /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/smoke/native.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:packages git:megatron-deepspeed git:ezpz install:ezpz env-file import-check smoke)
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
