#!/usr/bin/env bash
# Provision megatronapp-h100 on h100-venv (host h100-venv, facts profile:h100-venv),
# rendered by envbuild 0.1.0 from the plan; lock digest 8647f9cfbad7a0310e79394854a3b683b1cfae0343e2528be698bcac8e5ee128.
# Regenerate: envbuild render megatronapp-h100 --target h100-venv --format shell
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
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/state
  rm -f /root/.envbuild/envs/megatronapp-h100/pyvenv.cfg /root/.envbuild/envs/megatronapp-h100/bin/python /root/.envbuild/envs/megatronapp-h100/bin/python3 /root/.envbuild/envs/megatronapp-h100/bin/python3.12
  /usr/bin/python3.12 -m venv --system-site-packages /root/.envbuild/envs/megatronapp-h100
  /root/.envbuild/envs/megatronapp-h100/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==24.0, wheel==0.45.1
# why: pip pinned to 24.0 so build-option syntax is known; apex built with --no-build-isolation:
# why: setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and editable installs;
# why: without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements && cat > /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_93b40a7a3b9c' && chmod 0644 /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements/pip-tooling.txt
pip==24.0 --hash=sha256:ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_93b40a7a3b9c
  /root/.envbuild/envs/megatronapp-h100/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:packages: 6 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements && cat > /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_63323f83399f' && chmod 0644 /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements/pip-packages.txt
click==8.3.3 --hash=sha256:a2bf429bb3033c89fa4936ffb35d5cb471e3719e1f3c8a7c3fff0b8314305613
et-xmlfile==2.0.0 --hash=sha256:7a91720bc756843502c3b7504c77b8fe44217c85c537d85037f0f536151b2caa
joblib==1.5.3 --hash=sha256:5fc3c5039fc5ca8c0276333a188bbd59d6b7ab37fe6632daa76bc7f9ec18e713
openpyxl==3.1.5 --hash=sha256:5282c12b107bffeef825f4617dc029afaf41d0ea60823bbb665ef3079dc79de2
tqdm==4.67.3 --hash=sha256:ee1e4c0e59148062281c49d80b25b67771a127c85fc9676d3be5f243206826bf
nltk==3.9.1 --hash=sha256:4fa26829c5b00715afe3061398a8989dc643b92ce7dd93fb4585a70930d168a1
ENVBUILD_EOF_63323f83399f
  /root/.envbuild/envs/megatronapp-h100/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/megatronapp-h100/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:megatronapp: megatronapp @ 1bed2a720216
# why: megatronapp's commit (2025-06-04, "add pipeline example"), with the vendored Megatron
# why: core_v0.4.0 (38879f8b) and MegatronApp's training/schedules files, the bundled small dataset and
# why: GPT-2 vocabulary (datasets/). The build unpacks the carried rdma-core, builds and installs the
# why: shm_tensor_new_rdma extension with pip (deviation extension-installed-with-pip) and compiles the
# why: dataset helpers.
step_git_megatronapp() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatronapp.json"
}

# step patch:ib-addresses: patch ib-addresses
# why: The extension hard-codes the InfiniBand IPs of the authors' 8 ranks (192.168.0.2 x4, 192.168.0.7
# why: x4); the README says to edit them per cluster. Compiled in, they would tie an image to one set
# why: of nodes, and Kubernetes does not say which node a pod lands on. The list is read when the
# why: extension loads instead, from MEGATRONAPP_IB_ADDRESSES, which envbuild's launch fills at pod
# why: start (envbuild/node/ib_addresses.py): the image is the same for every pod and every cluster.
# why: The uses stay as published (ips[rank] != ips[next_rank], ips[next_rank].c_str()); TCP ports
# why: 20000+rank / 30000+rank too.
step_patch_ib_addresses() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-ib-addresses.json"
}

# step patch:cxx11-abi-from-torch: patch cxx11-abi-from-torch
# why: setup.py hard-codes -D_GLIBCXX_USE_CXX11_ABI=0; torch's BuildExtension appends the ABI torch was
# why: built with after the user flags, so the hard-coded value is at best redundant and at worst
# why: conflicting. Dropping it leaves torch's value as the only one (upstream later reads
# why: torch._C._GLIBCXX_USE_CXX11_ABI instead, ecd69f7b).
step_patch_cxx11_abi_from_torch() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-cxx11-abi-from-torch.json"
}

# step patch:rdma-core-from-the-tree: patch rdma-core-from-the-tree
# why: setup.py links rdmacm and ibverbs from the system (prerequisite.sh relies on the image's rdma-
# why: core); the node may have none. The carried packages' folder is named once here.
step_patch_rdma_core_from_the_tree() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-rdma-core-from-the-tree.json"
}

# step patch:rdma-core-include-and-libs: patch rdma-core-include-and-libs
# why: The compiler and linker look in the carried rdma-core first (rdma/rdma_cma.h,
# why: infiniband/verbs.h, librdmacm.so, libibverbs.so).
step_patch_rdma_core_include_and_libs() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-rdma-core-include-and-libs.json"
}

# step patch:rdma-core-rpath: patch rdma-core-rpath
# why: The loader finds librdmacm.so.1 and libibverbs.so.1 in the carried folder, and (DT_RPATH is
# why: searched for the dependencies of what the extension loads, DT_RUNPATH is not) libnl-3 and libnl-
# why: route-3 for them, without LD_LIBRARY_PATH.
step_patch_rdma_core_rpath() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-rdma-core-rpath.json"
}

# step patch:te-absent-stand-in: patch te-absent-stand-in
# why: The TE wrappers module imports transformer_engine at module level and subclasses its classes;
# why: everything reaches it at import: megatron.arguments -> megatron.core.models.retro
# why: (decoder_spec.py:18), transformer_block.py:13, gpt_layer_specs.py:7 (pretrain_gpt.py:28).
# why: Without TE the module now imports with stand-in base classes that refuse to be built, so the
# why: legacy model the published run trains (no --use-mcore-models) runs as published and a TE layer,
# why: if ever asked for, stops with a message naming this deviation.
step_patch_te_absent_stand_in() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-te-absent-stand-in.json"
}

# step patch:packaging-not-pkg-resources: patch packaging-not-pkg-resources
# why: The module takes `packaging` from pkg_resources only to call packaging.version.Version;
# why: pkg_resources is deprecated (setuptools 81 on the node warns when it is imported) and gone from
# why: later setuptools. `import packaging.version` binds the same name to the same package (packaging
# why: 26.3 on the node).
step_patch_packaging_not_pkg_resources() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-packaging-not-pkg-resources.json"
}

# step patch:torchrun-of-the-env: patch torchrun-of-the-env
# why: The node's torchrun script runs /opt/torch/.venv/bin/python, which does not see the venv's Apex
# why: and extension (docs/results/h100-offline.md, run 2 finding 4); the env's python runs the same
# why: launcher module with the same arguments.
step_patch_torchrun_of_the_env() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-torchrun-of-the-env.json"
}

# step patch:join-threads-releases-gil: patch join-threads-releases-gil
# why: join_threads() blocks in std::thread::join while its pybind11 binding keeps the GIL, and a hand-
# why: off thread that drops its reference to a tensor Python also holds needs the GIL under torch 2.11
# why: (c10/util/intrusive_ptr.h, Note [PyObject preservation for Tensor and Storages]: when the C++
# why: refcount goes from 2 to 1 the PyObject is decref'd, TensorImpl::decref_pyobject ->
# why: gil_scoped_acquire). On 4 x H200 the last stage's backward_send thread stopped there with four
# why: gradients unsent while its main thread sat in join_threads: a deadlock in iteration 1
# why: (docs/results/megatronapp-h100.md). The binding now releases the GIL while it joins; the threads
# why: and what they send are unchanged.
step_patch_join_threads_releases_gil() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-join-threads-releases-gil.json"
}

# step data:megatronapp: 6 data file(s) for megatronapp
# why: the published downloads, each checked against its sha256 and recorded on the node
step_data_megatronapp() {
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/data
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/tools && cp "$FILES/assets/node/fetch_data.py" /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py && chmod 0644 /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py
  /root/.envbuild/envs/megatronapp-h100/bin/python /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py --name libibverbs1 --url http://deb.debian.org/debian/pool/main/r/rdma-core/libibverbs1_44.0-2_amd64.deb --dest /root/.envbuild/envs/megatronapp-h100/src/megatronapp/.envbuild-debs/libibverbs1_44.0-2_amd64.deb --record-dir /root/.envbuild/envs/megatronapp-h100/.envbuild/data --sha256 35054815259fee46173240254246d03b673a5cd5c528aaac96fd15ac428a8d59 --root /root/.envbuild/envs/megatronapp-h100/src/megatronapp
  /root/.envbuild/envs/megatronapp-h100/bin/python /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py --name librdmacm1 --url http://deb.debian.org/debian/pool/main/r/rdma-core/librdmacm1_44.0-2_amd64.deb --dest /root/.envbuild/envs/megatronapp-h100/src/megatronapp/.envbuild-debs/librdmacm1_44.0-2_amd64.deb --record-dir /root/.envbuild/envs/megatronapp-h100/.envbuild/data --sha256 16b18625834371d023b81477823074ea0d34c478d58dbef3f01107984f47d034 --root /root/.envbuild/envs/megatronapp-h100/src/megatronapp
  /root/.envbuild/envs/megatronapp-h100/bin/python /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py --name libibverbs-dev --url http://deb.debian.org/debian/pool/main/r/rdma-core/libibverbs-dev_44.0-2_amd64.deb --dest /root/.envbuild/envs/megatronapp-h100/src/megatronapp/.envbuild-debs/libibverbs-dev_44.0-2_amd64.deb --record-dir /root/.envbuild/envs/megatronapp-h100/.envbuild/data --sha256 78e87d12fb642bc41b04cb2e2f3f2f23cee14b89978a846b83defe945f388f72 --root /root/.envbuild/envs/megatronapp-h100/src/megatronapp
  /root/.envbuild/envs/megatronapp-h100/bin/python /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py --name librdmacm-dev --url http://deb.debian.org/debian/pool/main/r/rdma-core/librdmacm-dev_44.0-2_amd64.deb --dest /root/.envbuild/envs/megatronapp-h100/src/megatronapp/.envbuild-debs/librdmacm-dev_44.0-2_amd64.deb --record-dir /root/.envbuild/envs/megatronapp-h100/.envbuild/data --sha256 9606a1ffa6c3568e8861ce3b8b55b7e73bda35920d1264e1c82485496798de32 --root /root/.envbuild/envs/megatronapp-h100/src/megatronapp
  /root/.envbuild/envs/megatronapp-h100/bin/python /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py --name libnl-3-200 --url http://deb.debian.org/debian/pool/main/libn/libnl3/libnl-3-200_3.7.0-0.2%2bb1_amd64.deb --dest /root/.envbuild/envs/megatronapp-h100/src/megatronapp/.envbuild-debs/libnl-3-200_3.7.0-0.2+b1_amd64.deb --record-dir /root/.envbuild/envs/megatronapp-h100/.envbuild/data --sha256 d1fc3e9eb8e79b4c96b0a64c3d8c9e068ae2f665cab71bd19f417ffd0453a890 --root /root/.envbuild/envs/megatronapp-h100/src/megatronapp
  /root/.envbuild/envs/megatronapp-h100/bin/python /root/.envbuild/envs/megatronapp-h100/.envbuild/tools/fetch_data.py --name libnl-route-3-200 --url http://deb.debian.org/debian/pool/main/libn/libnl3/libnl-route-3-200_3.7.0-0.2%2bb1_amd64.deb --dest /root/.envbuild/envs/megatronapp-h100/src/megatronapp/.envbuild-debs/libnl-route-3-200_3.7.0-0.2+b1_amd64.deb --record-dir /root/.envbuild/envs/megatronapp-h100/.envbuild/data --sha256 0fdcc425ae2982788c085c76a7cb0eda3e3db99d41bd1ce56082ee18e9f1e21f --root /root/.envbuild/envs/megatronapp-h100/src/megatronapp
}

# step build:megatronapp: build megatronapp
# why: published build step for megatronapp
step_build_megatronapp() {
  (cd /root/.envbuild/envs/megatronapp-h100/src/megatronapp && env PATH=/root/.envbuild/envs/megatronapp-h100/bin:"$PATH" bash -ec "rm -rf .envbuild-rdma && mkdir .envbuild-rdma && find .envbuild-debs -name '*.deb' -exec dpkg-deb -x {} .envbuild-rdma ';' && test -e .envbuild-rdma/usr/include/rdma/rdma_cma.h && test -e .envbuild-rdma/lib/x86_64-linux-gnu/libnl-3.so.200")
  (cd /root/.envbuild/envs/megatronapp-h100/src/megatronapp && env PATH=/root/.envbuild/envs/megatronapp-h100/bin:"$PATH" bash -ec 'python -m pip install --no-deps --no-build-isolation --no-index .')
  (cd /root/.envbuild/envs/megatronapp-h100/src/megatronapp && env PATH=/root/.envbuild/envs/megatronapp-h100/bin:"$PATH" bash -ec 'python3 -c "import subprocess, sysconfig; subprocess.check_call(['"'"'make'"'"', '"'"'-C'"'"', '"'"'Megatron/megatron/core/datasets'"'"', '"'"'LIBEXT='"'"' + sysconfig.get_config_var('"'"'EXT_SUFFIX'"'"')])"')
}

# step git:apex: apex @ 6424da3b4faa
# why: NGC 23.04's Apex is not on the node (deviation apex-built-from-source). 6424da3b builds against
# why: torch 2.11.0+cu130 with nvcc 13.0 on this node type (alpa-megatron-h100, h100-megatron-
# why: deepspeed); --cuda_ext builds what the vendored Megatron imports: amp_C
# why: (apex.optimizers.FusedAdam), fused_layer_norm_cuda (megatron/model/fused_layer_norm.py:41) and
# why: the scaled_*softmax_cuda kernels (megatron/model/fused_softmax.py).
step_git_apex() {
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex 2026-07-08 reads APEX_* env vars (since 2025-07-22, bfb500c8); pyproject.toml -> --no-
# why: build-isolation so the build sees the installed torch; 4 extension(s) x 4 job(s) x 1 nvcc
# why: thread(s) = 16 concurrent nvcc at ~3 GiB each within 109 of 128 GiB, keeping 19 GiB headroom (16
# why: cores, 1 GPU arch(s); NVIDIA/apex#1882)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 4 ? $(nproc) : 4 ))" /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-6424da3b4faa-837967d631b5195728b8.json"
  /root/.envbuild/envs/megatronapp-h100/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/megatronapp-h100/.envbuild/wheels/apex-6424da3b4faa-837967d631b5195728b8 apex
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild && cat > /root/.envbuild/envs/megatronapp-h100/.envbuild/env.sh <<'ENVBUILD_EOF_8dd28569066c' && chmod 0644 /root/.envbuild/envs/megatronapp-h100/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/megatronapp-h100
export PATH=/root/.envbuild/envs/megatronapp-h100/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
ENVBUILD_EOF_8dd28569066c
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/megatronapp-h100/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch apex amp_C fused_layer_norm_cuda scaled_upper_triang_masked_softmax_cuda shm_tensor_new_rdma nltk openpyxl
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/megatronapp-h100/.envbuild/smoke/apex_check.py
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/megatronapp-h100/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:packages git:megatronapp patch:ib-addresses patch:cxx11-abi-from-torch patch:rdma-core-from-the-tree patch:rdma-core-include-and-libs patch:rdma-core-rpath patch:te-absent-stand-in patch:packaging-not-pkg-resources patch:torchrun-of-the-env patch:join-threads-releases-gil data:megatronapp build:megatronapp git:apex apex:apex env-file import-check smoke)
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
