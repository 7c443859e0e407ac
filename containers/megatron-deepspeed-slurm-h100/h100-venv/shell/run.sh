#!/usr/bin/env bash
# Provision megatron-deepspeed-slurm-h100 on h100-venv (host h100-venv, facts profile:h100-venv),
# rendered by envbuild 0.1.0 from the plan; lock digest 9cbe7b5aa28d5f8f442064255b3b65232c3f4ea6808b5b68338b50599110e55b.
# Regenerate: envbuild render megatron-deepspeed-slurm-h100 --target h100-venv --format shell
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
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/state
  rm -f /root/.envbuild/envs/megatron-deepspeed-slurm-h100/pyvenv.cfg /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python3 /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python3.12
  /usr/bin/python3.12 -m venv --system-site-packages /root/.envbuild/envs/megatron-deepspeed-slurm-h100
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==24.0, wheel==0.45.1
# why: pip pinned to 24.0 so build-option syntax is known; deepspeed, apex built with --no-build-
# why: isolation: setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and editable
# why: installs; without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements && cat > /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_93b40a7a3b9c' && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements/pip-tooling.txt
pip==24.0 --hash=sha256:ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_93b40a7a3b9c
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:packages: 2 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements && cat > /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_c89b4bba4cfd' && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements/pip-packages.txt
hjson==3.1.0 --hash=sha256:65713cdcf13214fb554eb8b4ef803419733f4f5e551047c9b711098ab7186b89
nltk==3.9.4 --hash=sha256:f2fa301c3a12718ce4a0e9305c5675299da5ad9e26068218b69d692fda84828f
ENVBUILD_EOF_c89b4bba4cfd
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:deepspeed: deepspeed @ dda03361a730
# why: The release megatron-deepspeed-slurm pins (deviation deepspeed-unpinned there), from its tag
# why: instead of the PyPI sdist so that the three torch._six imports can be patched (deviation torch-
# why: six-removed). Built without isolation against the node's torch with setup.py's default
# why: DS_BUILD_OPS=0: no op is compiled at install; Megatron's optimizer is Apex's FusedAdam, so
# why: DeepSpeed's own ops are not used by this benchmark.
step_git_deepspeed() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-deepspeed.json"
}

# step patch:ds-utils-torch-six-inf: patch ds-utils-torch-six-inf
# why: deepspeed/runtime/utils.py:19 (v0.6.3) imports inf from torch._six, which torch 2.0 removed;
# why: torch.inf is the same float('inf').
step_patch_ds_utils_torch_six_inf() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-ds-utils-torch-six-inf.json"
}

# step patch:ds-stage3-torch-six-inf: patch ds-stage3-torch-six-inf
# why: deepspeed/runtime/zero/stage3.py:19 (v0.6.3), imported by deepspeed.runtime.engine; the same
# why: change.
step_patch_ds_stage3_torch_six_inf() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-ds-stage3-torch-six-inf.json"
}

# step patch:ds-stage12-torch-six-inf: patch ds-stage12-torch-six-inf
# why: deepspeed/runtime/zero/stage_1_and_2.py:8 (v0.6.3), the ZeRO-1 optimizer this benchmark runs;
# why: the same change.
step_patch_ds_stage12_torch_six_inf() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-ds-stage12-torch-six-inf.json"
}

# step patch:ds-numpy-bufsize: patch ds-numpy-bufsize
# why: deepspeed/autotuning/scheduler.py:4 (v0.6.3) imports BUFSIZE from numpy, which NumPy 2.0 no
# why: longer exports, and `import deepspeed` reaches it (runtime/config.py imports autotuning.config,
# why: autotuning/__init__.py the scheduler): ImportError on the node's numpy 2.5.2 (CPU rehearsal over
# why: the node's stand-in). Line 20, `from .constants import *`, rebinds BUFSIZE to
# why: autotuning/constants.py:30's 1 (line buffering) before any use, so the numpy name was never the
# why: one used: the line goes, nothing else changes.
step_patch_ds_numpy_bufsize() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-ds-numpy-bufsize.json"
}

# step install:deepspeed: install deepspeed (wheel)
# why: non-editable install, as the published instructions require
step_install_deepspeed() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/megatron-deepspeed-slurm-h100/src/deepspeed
}

# step git:megatron-deepspeed: megatron-deepspeed @ 87476ced4362
# why: The commit megatron-deepspeed-slurm pins (87476ced, 2022-04-25, first-parent main contemporary
# why: with the scripts). No setup.py install: the scripts run pretrain_gpt.py and
# why: tools/preprocess_data.py from the tree, which imports megatron from its own folder.
step_git_megatron_deepspeed() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatron-deepspeed.json"
}

# step patch:torch-six-inf: patch torch-six-inf
# why: megatron/optimizer/clip_grads.py:19 (87476ced) imports inf from torch._six, as Megatron b31e129
# why: does (alpa-megatron-h100).
step_patch_torch_six_inf() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-torch-six-inf.json"
}

# step patch:numpy-float-alias: patch numpy-float-alias
# why: indexed_dataset.py:98,271 (87476ced) names np.float at module level (imported by
# why: preprocess_data.py and megatron.data); NumPy 1.24 removed the alias. np.float was the builtin
# why: float itself, so the dtype table and dict keys stay the same.
step_patch_numpy_float_alias() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-numpy-float-alias.json"
}

# step patch:fused-kernels-sm90: patch fused-kernels-sm90
# why: megatron/fused_kernels/__init__.py:53 (87476ced; the file is byte-identical to Megatron
# why: b31e129's, which alpa-megatron-h100 patches the same way) JIT-builds the fused softmax and
# why: layer-norm kernels for sm_70 (plus sm_80 for nvcc >= 11, kept); nvcc 13 rejects compute_70 and
# why: neither cubin runs on sm_90.
step_patch_fused_kernels_sm90() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-fused-kernels-sm90.json"
}

# step patch:jit-modules-by-name: patch jit-modules-by-name
# why: fused_layer_norm.py:68 imports fused_mix_prec_layer_norm_cuda with importlib.import_module and
# why: fused_softmax.py:30 `import scaled_upper_triang_masked_softmax_cuda`; torch 2.x's
# why: cpp_extension.load() does not register the module in sys.modules (the H100's first alpa-
# why: megatron-h100 run died there). The loaded module is put in sys.modules under its name.
step_patch_jit_modules_by_name() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-jit-modules-by-name.json"
}

# step patch:sample-idx-python: patch sample-idx-python
# why: gpt_dataset.py:275 (87476ced) calls the C++ build_sample_idx, which died with SIGSEGV on the
# why: node's numpy 2.5.2 (h100-megatron-deepspeed, the same helpers.cpp call); the same mapping from
# why: gpt_dataset.py's own Python _build_sample_idx (:362), whose call the commit keeps commented out
# why: below it.
step_patch_sample_idx_python() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-sample-idx-python.json"
}

# step build:megatron-deepspeed: build megatron-deepspeed
# why: published build step for megatron-deepspeed; its outputs (megatron/fused_kernels/build) are
# why: built once per key tree-megatron-deepspeed-87476ced4362-449edecf7e561a2e6fc1 and restored from
# why: the build cache on the next node
step_build_megatron_deepspeed() {
  (cd /root/.envbuild/envs/megatron-deepspeed-slurm-h100/src/megatron-deepspeed && env PATH=/root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin:"$PATH" bash -ec 'python3 -c "import subprocess, sysconfig; subprocess.check_call(['"'"'make'"'"', '"'"'-C'"'"', '"'"'megatron/data'"'"', '"'"'LIBEXT='"'"' + sysconfig.get_config_var('"'"'EXT_SUFFIX'"'"')])"')
  (cd /root/.envbuild/envs/megatron-deepspeed-slurm-h100/src/megatron-deepspeed && env PATH=/root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin:"$PATH" bash -ec 'python3 -c "import sys, types, torch, importlib.util as u; torch.cuda.is_available() or sys.exit(print('"'"'no GPU: the fused kernels are built at the first start'"'"')); s = u.spec_from_file_location('"'"'megatron_fused_kernels'"'"', '"'"'megatron/fused_kernels/__init__.py'"'"'); m = u.module_from_spec(s); s.loader.exec_module(m); m.load(types.SimpleNamespace(rank=0, masked_softmax_fusion=True))"')
  (cd /root/.envbuild/envs/megatron-deepspeed-slurm-h100/src/megatron-deepspeed && env PATH=/root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin:"$PATH" bash -ec 'python3 -c "from deepspeed.ops.op_builder import UtilsBuilder; UtilsBuilder().load()"')
}

# step git:apex: apex @ 6424da3b4faa
# why: NGC 22.02's Apex is the image's (megatron-deepspeed-slurm: preinstalled); the node has none.
# why: 6424da3b (2026-07-08) builds against torch 2.11.0+cu130 with nvcc 13.0 on this node type (alpa-
# why: megatron-h100, h100-megatron-deepspeed) and has what 87476ced imports: apex.optimizers FusedAdam
# why: and FusedSGD, apex.multi_tensor_apply, amp_C. --cuda_ext builds amp_C (deviation apex-not-in-
# why: the-node).
step_git_apex() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex 2026-07-08 reads APEX_* env vars (since 2025-07-22, bfb500c8); pyproject.toml -> --no-
# why: build-isolation so the build sees the installed torch; 4 extension(s) x 4 job(s) x 1 nvcc
# why: thread(s) = 16 concurrent nvcc at ~3 GiB each within 109 of 128 GiB, keeping 19 GiB headroom (16
# why: cores, 1 GPU arch(s); NVIDIA/apex#1882)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 4 ? $(nproc) : 4 ))" /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-6424da3b4faa-837967d631b5195728b8.json"
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/wheels/apex-6424da3b4faa-837967d631b5195728b8 apex
}

# step git:gpt2-vocab: gpt2-vocab @ f4157bea69f3
# why: The GPT-2 BPE vocabulary and merges the README downloads from S3, pinned so that they travel in
# why: the bundle (deviation oscar-and-s3-vocab-unreachable): the same repository's main (f4157bea,
# why: 2024-12-24) commits them as examples_deepspeed/rebase/gpt2-vocab.json and gpt2-merges.txt (git
# why: blobs 1f1d9aac, 226b0752; the same blobs its MoE commit 69f75b1e, 2022-05-23, put at the root
# why: under the names the Slurm script reads). Clone only; nothing of this tree is imported.
step_git_gpt2_vocab() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-gpt2-vocab.json"
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild && cat > /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/env.sh <<'ENVBUILD_EOF_6310235993a2' && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/megatron-deepspeed-slurm-h100
export PATH=/root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
ENVBUILD_EOF_6310235993a2
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" deepspeed deepspeed.runtime.zero.stage_1_and_2 apex amp_C apex.optimizers nltk
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm-h100/.envbuild/smoke/apex_check.py
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/megatron-deepspeed-slurm-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:packages git:deepspeed patch:ds-utils-torch-six-inf patch:ds-stage3-torch-six-inf patch:ds-stage12-torch-six-inf patch:ds-numpy-bufsize install:deepspeed git:megatron-deepspeed patch:torch-six-inf patch:numpy-float-alias patch:fused-kernels-sm90 patch:jit-modules-by-name patch:sample-idx-python build:megatron-deepspeed git:apex apex:apex git:gpt2-vocab env-file import-check smoke)
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
