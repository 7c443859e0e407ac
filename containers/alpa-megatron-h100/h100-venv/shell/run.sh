#!/usr/bin/env bash
# Provision alpa-megatron-h100 on h100-venv (host h100-venv, facts profile:h100-venv),
# rendered by envbuild 0.1.0 from the plan; lock digest f14fb693c434eac46e9d44a42045a01819ce9a91b8e01db9c03a1733443007c7.
# Regenerate: envbuild render alpa-megatron-h100 --target h100-venv --format shell
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
  mkdir -p /root/.envbuild/envs/alpa-megatron-h100/.envbuild/state
  rm -f /root/.envbuild/envs/alpa-megatron-h100/pyvenv.cfg /root/.envbuild/envs/alpa-megatron-h100/bin/python /root/.envbuild/envs/alpa-megatron-h100/bin/python3 /root/.envbuild/envs/alpa-megatron-h100/bin/python3.12
  /usr/bin/python3.12 -m venv --system-site-packages /root/.envbuild/envs/alpa-megatron-h100
  /root/.envbuild/envs/alpa-megatron-h100/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==24.0, wheel==0.45.1
# why: pip pinned to 24.0 so build-option syntax is known; apex built with --no-build-isolation:
# why: setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and editable installs;
# why: without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/alpa-megatron-h100/.envbuild/requirements && cat > /root/.envbuild/envs/alpa-megatron-h100/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_93b40a7a3b9c' && chmod 0644 /root/.envbuild/envs/alpa-megatron-h100/.envbuild/requirements/pip-tooling.txt
pip==24.0 --hash=sha256:ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_93b40a7a3b9c
  /root/.envbuild/envs/alpa-megatron-h100/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/alpa-megatron-h100/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step git:megatron: megatron @ c28bbd208d16
# why: alpa-megatron's Megatron: NVIDIA b31e129 + 55fd45c, d71f762, c28bbd2 (tie_embedding disabled).
# why: No setup.py (deleted in 6c00f448), so on sys.path through a .pth; the checkout stays writable
# why: because the fused kernels are JIT-built into megatron/fused_kernels/build.
step_git_megatron() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatron.json"
}

# step patch:tie-embedding-disabled: patch tie-embedding-disabled
# why: The baseline's one behavioural change, as in alpa-megatron: c28bbd2 guards the embedding-group
# why: all-reduce with a literal False.
step_patch_tie_embedding_disabled() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-tie-embedding-disabled.json"
}

# step patch:torch-six-inf: patch torch-six-inf
# why: clip_grads.py imports inf from torch._six, which torch 2.0 removed; torch.inf is the same
# why: float('inf').
step_patch_torch_six_inf() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-torch-six-inf.json"
}

# step patch:numpy-float-alias: patch numpy-float-alias
# why: indexed_dataset.py (imported by megatron.training through megatron.data) names np.float at
# why: module level; NumPy 1.24 removed the alias. np.float was the builtin float itself, so the
# why: builtin gives the same dtype table and the same dict keys.
step_patch_numpy_float_alias() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-numpy-float-alias.json"
}

# step patch:fused-kernels-sm90: patch fused-kernels-sm90
# why: The fused softmax and layer-norm kernels are JIT-built with a fixed -gencode for sm_70 (plus
# why: sm_80 for nvcc >= 11, kept); nvcc 13 no longer accepts compute_70, and neither cubin runs on
# why: sm_90. The H100's own arch replaces sm_70; the kernels' code is unchanged.
step_patch_fused_kernels_sm90() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-fused-kernels-sm90.json"
}

# step patch:jit-modules-by-name: patch jit-modules-by-name
# why: Megatron loads its fused kernels with cpp_extension.load() and then imports them by name
# why: (fused_layer_norm.py: importlib.import_module("fused_mix_prec_layer_norm_cuda"),
# why: fused_softmax.py: import scaled_masked_softmax_cuda). torch 1.8 loaded them with imp, which
# why: registered them in sys.modules; torch 2.x execs a module from a file spec and does not, so the
# why: first layer norm failed on the H100 with ModuleNotFoundError. The loaded module is put in
# why: sys.modules under its name.
step_patch_jit_modules_by_name() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-jit-modules-by-name.json"
}

# step build:megatron: build megatron
# why: published build step for megatron; its outputs (megatron/fused_kernels/build) are built once per
# why: key tree-megatron-c28bbd208d16-d420024fed4bc69d3df2 and restored from the build cache on the
# why: next node
step_build_megatron() {
  (cd /root/.envbuild/envs/alpa-megatron-h100/src/megatron && env PATH=/root/.envbuild/envs/alpa-megatron-h100/bin:"$PATH" bash -ec 'python3 -c "import subprocess, sysconfig; subprocess.check_call(['"'"'make'"'"', '"'"'-C'"'"', '"'"'megatron/data'"'"', '"'"'LIBEXT='"'"' + sysconfig.get_config_var('"'"'EXT_SUFFIX'"'"')])"')
  (cd /root/.envbuild/envs/alpa-megatron-h100/src/megatron && env PATH=/root/.envbuild/envs/alpa-megatron-h100/bin:"$PATH" bash -ec 'if python -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then python -c "import importlib.util, types; s = importlib.util.spec_from_file_location('"'"'fused_kernels'"'"', '"'"'megatron/fused_kernels/__init__.py'"'"'); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); m.load(types.SimpleNamespace(rank=0, masked_softmax_fusion=True))"; else echo "no GPU here: the fused kernels are left to the benchmark'"'"'s first start"; fi')
}

# step install:megatron: install megatron (pth)
# why: no setup.py at this commit: a .pth entry puts the tree on sys.path
step_install_megatron() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python -c 'import sys, sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['"'"'purelib'"'"'], '"'"'envbuild-'"'"' + sys.argv[1] + '"'"'.pth'"'"').write_text(sys.argv[2] + '"'"'\n'"'"')' megatron /root/.envbuild/envs/alpa-megatron-h100/src/megatron
}

# step git:apex: apex @ 6424da3b4faa
# why: alpa-megatron's Apex e2083df5 predates torch 2 and CUDA 13 (deviation apex-e2083df5-cuda13).
# why: 6424da3b (2026-07-08) builds against torch 2.11.0+cu130 with nvcc 13.0 on this node type
# why: (docs/results/h100-offline.md, h100-megatron-deepspeed) and still has what b31e129 imports:
# why: apex.optimizers FusedAdam and FusedSGD (over amp_C), apex.multi_tensor_apply, amp_C
# why: (multi_tensor_l2norm, multi_tensor_scale). --cuda_ext builds amp_C; Apex 6424da3b has no switch
# why: that builds amp_C alone, so its other core extensions are built too.
step_git_apex() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex 2026-07-08 reads APEX_* env vars (since 2025-07-22, bfb500c8); pyproject.toml -> --no-
# why: build-isolation so the build sees the installed torch; 4 extension(s) x 4 job(s) x 1 nvcc
# why: thread(s) = 16 concurrent nvcc at ~3 GiB each within 109 of 128 GiB, keeping 19 GiB headroom (16
# why: cores, 1 GPU arch(s); NVIDIA/apex#1882)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 4 ? $(nproc) : 4 ))" /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-6424da3b4faa-837967d631b5195728b8.json"
  /root/.envbuild/envs/alpa-megatron-h100/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/alpa-megatron-h100/.envbuild/wheels/apex-6424da3b4faa-837967d631b5195728b8 apex
}

# step git:alpa: alpa @ e0ae8bf849ea
# why: Alpa's benchmark driver and TFLOPS formula (benchmark/util.py), as in alpa-megatron; clone only,
# why: used from the checkout.
step_git_alpa() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-alpa.json"
}

# step patch:launch-to-run: patch launch-to-run
# why: From torch 2.0 torch.distributed.launch passes --local-rank=N (dashed) to the script; Megatron
# why: b31e129's parser only knows --local_rank and parse_args() refuses the rest.
# why: torch.distributed.run (torchrun) takes the same options and passes the rank in the environment
# why: (LOCAL_RANK, RANK, WORLD_SIZE), which Megatron's initialize reads.
step_patch_launch_to_run() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-launch-to-run.json"
}

# step patch:args-suite-undefined: patch args-suite-undefined
# why: benchmark_gpt.py's message for a GPU count without a case names args.suite, which its parser
# why: (--nproc_per_node, --nnodes, --node_rank, --master_addr, --master_port) never defines, so it
# why: dies with AttributeError instead of printing the message: an erratum of alpa-megatron (args-
# why: suite-undefined). The message names the suite it looked in.
step_patch_args_suite_undefined() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-args-suite-undefined.json"
}

# step patch:two-gpu-case: patch two-gpu-case
# why: gpt_megatron_best_suite has cases for 1, 4, 8, 16 and 32 GPUs only; on a 2-GPU node
# why: benchmark_gpt.py finds none. The added case is the 1-GPU case's model and per-GPU shape on two
# why: data-parallel ranks (350M, global batch 256 as 8 micro-batches of 16 per rank), the case Alpa's
# why: own 2-GPU suite lists for data parallelism at batch 256.
step_patch_two_gpu_case() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-two-gpu-case.json"
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/alpa-megatron-h100/.envbuild && cat > /root/.envbuild/envs/alpa-megatron-h100/.envbuild/env.sh <<'ENVBUILD_EOF_59817bb70567' && chmod 0644 /root/.envbuild/envs/alpa-megatron-h100/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/alpa-megatron-h100
export PATH=/root/.envbuild/envs/alpa-megatron-h100/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
ENVBUILD_EOF_59817bb70567
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/alpa-megatron-h100/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" megatron apex amp_C apex.optimizers megatron.optimizer
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/alpa-megatron-h100/.envbuild/smoke/apex_check.py
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  /root/.envbuild/envs/alpa-megatron-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-native.json" || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling git:megatron patch:tie-embedding-disabled patch:torch-six-inf patch:numpy-float-alias patch:fused-kernels-sm90 patch:jit-modules-by-name build:megatron install:megatron git:apex apex:apex git:alpa patch:launch-to-run patch:args-suite-undefined patch:two-gpu-case env-file import-check smoke)
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
