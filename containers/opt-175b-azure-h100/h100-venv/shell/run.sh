#!/usr/bin/env bash
# Provision opt-175b-azure-h100 on h100-venv (host h100-venv, facts profile:h100-venv),
# rendered by envbuild 0.1.0 from the plan; lock digest 2f711102290948bd1ac760762ff140a7b247e368b17c4bbeb72a6c1907dfc026.
# Regenerate: envbuild render opt-175b-azure-h100 --target h100-venv --format shell
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
  mkdir -p /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/state
  rm -f /root/.envbuild/envs/opt-175b-azure-h100/pyvenv.cfg /root/.envbuild/envs/opt-175b-azure-h100/bin/python /root/.envbuild/envs/opt-175b-azure-h100/bin/python3 /root/.envbuild/envs/opt-175b-azure-h100/bin/python3.12
  /usr/bin/python3.12 -m venv --system-site-packages /root/.envbuild/envs/opt-175b-azure-h100
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: setuptools==79.0.1, wheel==0.45.1
# why: setuptools pinned by the recipe; metaseq, fairscale built with --no-build-isolation: setuptools
# why: < 70.1 needs the wheel package (< 0.46) for bdist_wheel and editable installs; without it pip
# why: fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements && cat > /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_8e5ed4fe1eb4' && chmod 0644 /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements/pip-tooling.txt
setuptools==79.0.1 --hash=sha256:e147c0549f27767ba362f9da434eab9c5dc0045d5304feb602a0af001089fc51
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_8e5ed4fe1eb4
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:packages: 3 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements && cat > /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_295430a4bfd1' && chmod 0644 /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements/pip-packages.txt
antlr4-python3-runtime==4.9.3 --hash=sha256:f224469b4168294902bb1efa80a8bf7855f24c99aef99cbefc1bcd3cce77881b
omegaconf==2.3.0 --hash=sha256:7b4df175cdb08ba400f45cae3bdcae7ba8365db4d165fc65fd04b050ab63b46b
hydra-core==1.3.2 --hash=sha256:fa0238a9e31df3373b35b0bfb672c34cc92718d21f81311d8996a16de1141d8b
ENVBUILD_EOF_295430a4bfd1
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:metaseq: metaseq @ 4de251ffca9a
# why: 4de251ff (2023-04-10, PR #697 "Port in megatron and apex dependencies") is the first metaseq
# why: commit that carries the Megatron fairseq_v3 files it uses, ported from ngoyal2707/Megatron-
# why: LM@fa6c0860 (metaseq/modules/megatron: mpu, fused softmax and its CUDA kernels), and the Apex
# why: kernels it calls (metaseq/modules/apex: amp_C, fused_adam_cuda, fused_layer_norm_cuda,
# why: fused_dense_cuda, apex_C), all built by its own setup.py with torch's BuildExtension. It
# why: contains a1a4e733 and 5ca60055; opt_baselines.py is unchanged from 5ca60055. The editable
# why: install (no build isolation) builds the Cython and CUDA extensions into the tree, which opt-
# why: baselines' code snapshot copies.
step_git_metaseq() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-metaseq.json"
}

# step patch:dataclass-default-factory: patch dataclass-default-factory
# why: MetaseqConfig's ten sub-configs are dataclass instances as field defaults; Python 3.11 refuses
# why: an unhashable default ("mutable default <class 'CommonConfig'> for field common is not allowed:
# why: use default_factory") when `import metaseq` builds the class. Each becomes
# why: field(default_factory=...), which gives every config the same fresh default.
step_patch_dataclass_default_factory() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-dataclass-default-factory.json"
}

# step patch:hydra-init-default-factory: patch hydra-init-default-factory
# why: hydra_init() stores each MetaseqConfig field's default in hydra's ConfigStore; with the sub-
# why: configs now default_factory fields their .default is dataclasses.MISSING, which omegaconf
# why: refuses ("Object of unsupported type: '_MISSING_TYPE'"). The factory's instance is stored
# why: instead: the same object the old default was.
step_patch_hydra_init_default_factory() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-hydra-init-default-factory.json"
}

# step patch:omegaconf-primitive-type: patch omegaconf-primitive-type
# why: convert_namespace_to_omegaconf() (train.py's first step) swaps omegaconf's private
# why: _utils.is_primitive_type for a lambda so a Namespace can be set in a DictConfig; omegaconf 2.2
# why: renamed it is_primitive_type_annotation, so with omegaconf 2.3.0 the benchmark's train.py stops
# why: with AttributeError before training. The same swap on the new name.
step_patch_omegaconf_primitive_type() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-omegaconf-primitive-type.json"
}

# step patch:opt-125m-batch-2gpu: patch opt-125m-batch-2gpu
# why: opt_baselines.py sets --batch-size to (tokens per batch / data-parallel ranks) / 2048: the
# why: published 0.5M tokens on 8 GPUs at TP 2 is 64 sequences of 2048 per GPU; on 2 GPUs (data
# why: parallel 1) it would be 256 per GPU. A quarter of the tokens keeps the published run's per-GPU
# why: shape (64 x 2048) on 2 GPUs.
step_patch_opt_125m_batch_2gpu() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-opt-125m-batch-2gpu.json"
}

# step patch:fused-dense-scalar-type: patch fused-dense-scalar-type
# why: The vendored Apex fused_dense.cpp dispatches on the deprecated input.type() (a
# why: DeprecatedTypeProperties); torch 2.11's AT_DISPATCH macros take a c10::ScalarType only, so
# why: building fused_dense_cuda stops ("cannot convert 'const at::DeprecatedTypeProperties' to
# why: 'c10::ScalarType'", the GPU node's install-metaseq log). Each of the four dispatches gets
# why: input.scalar_type(), as Apex itself did in c2480740 (#1672).
step_patch_fused_dense_scalar_type() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-fused-dense-scalar-type.json"
}

# step build:metaseq: build metaseq
# why: published build step for metaseq; its outputs (build) are built once per key tree-
# why: metaseq-4de251ffca9a-8d1f2ef8b6825faa8150 and restored from the build cache on the next node
step_build_metaseq() {
  (cd /root/.envbuild/envs/opt-175b-azure-h100/src/metaseq && env PATH=/root/.envbuild/envs/opt-175b-azure-h100/bin:"$PATH" bash -ec 'python3 setup.py build_ext --inplace')
  (cd /root/.envbuild/envs/opt-175b-azure-h100/src/metaseq && env PATH=/root/.envbuild/envs/opt-175b-azure-h100/bin:"$PATH" bash -ec 'rm -rf build/lib.*')
}

# step install:metaseq: install metaseq (editable)
# why: editable install: the tree stays writable (JIT kernels build into it)
step_install_metaseq() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation -e /root/.envbuild/envs/opt-175b-azure-h100/src/metaseq
}

# step git:fairscale: fairscale @ 191553190d73
# why: The guide's branch and commit, as opt-175b-azure (v0.4.6 + 5 commits, version 0.4.6); installed
# why: non-editable as the guide says. Its collectives use dist._all_gather_base /
# why: _reduce_scatter_base, guarded by hasattr, which torch 2.11 still has.
step_git_fairscale() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-fairscale.json"
}

# step install:fairscale: install fairscale (wheel)
# why: non-editable install, as the published instructions require
step_install_fairscale() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/opt-175b-azure-h100/src/fairscale
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/opt-175b-azure-h100/.envbuild && cat > /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/env.sh <<'ENVBUILD_EOF_5adb957a0359' && chmod 0644 /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/opt-175b-azure-h100
export PATH=/root/.envbuild/envs/opt-175b-azure-h100/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
ENVBUILD_EOF_5adb957a0359
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch fairscale hydra omegaconf amp_C fused_adam_cuda fused_layer_norm_cuda metaseq.modules.megatron.fused_kernels.scaled_masked_softmax_cuda metaseq
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/opt-175b-azure-h100/.envbuild/smoke/collective.py
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/opt-175b-azure-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:packages git:metaseq patch:dataclass-default-factory patch:hydra-init-default-factory patch:omegaconf-primitive-type patch:opt-125m-batch-2gpu patch:fused-dense-scalar-type build:metaseq install:metaseq git:fairscale install:fairscale env-file import-check smoke)
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
