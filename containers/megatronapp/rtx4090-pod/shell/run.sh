#!/usr/bin/env bash
# Provision megatronapp on rtx4090-pod (host rtx4090-pod, facts profile:rtx4090-pod),
# rendered by envbuild 0.1.0 from the plan; lock digest fa2e5965ded16dfa533972a21c0944f37ba3ceae22d228f0f218f46f977e6b9b.
# Regenerate: envbuild render megatronapp --target rtx4090-pod --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  :  # nothing to do on this node
}

# step system-packages: System packages
# why: native prerequisites named by the published instructions
step_system_packages() {
  env DEBIAN_FRONTEND=noninteractive apt-get update -q
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libmpfr-dev libgmp3-dev libmpc-dev libevent-dev strace perftest
}

# step environment: container environment, Python 3.8
# why: recipe asks for Python 3.8; inside the image nvcr.io/nvidia/pytorch:23.04-py3: a venv with
# why: --system-site-packages over the image's python3 keeps its preinstalled packages and takes the
# why: plan's
step_environment() {
  mkdir -p /root/.envbuild/envs/megatronapp/.envbuild/state
  rm -f /root/.envbuild/envs/megatronapp/pyvenv.cfg /root/.envbuild/envs/megatronapp/bin/python /root/.envbuild/envs/megatronapp/bin/python3 /root/.envbuild/envs/megatronapp/bin/python3.8
  python3 -m venv --system-site-packages /root/.envbuild/envs/megatronapp
  /root/.envbuild/envs/megatronapp/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip:packages: 11 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/megatronapp/.envbuild/requirements && cat > /root/.envbuild/envs/megatronapp/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_4435a0cb3eea' && chmod 0644 /root/.envbuild/envs/megatronapp/.envbuild/requirements/pip-packages.txt
click==8.1.8 --hash=sha256:63c132bbbed01578a06712a2d1f497bb62d9c1c0d329b7903a866228027263b2
et-xmlfile==2.0.0 --hash=sha256:7a91720bc756843502c3b7504c77b8fe44217c85c537d85037f0f536151b2caa
joblib==1.4.2 --hash=sha256:06d478d5674cbc267e7496a410ee875abd68e4340feff4490bcb7afb88060ae6
netifaces==0.11.0 --hash=sha256:c92ff9ac7c2282009fe0dcb67ee3cd17978cffbe0c8f4b471c00fe4325c9b4d4
openpyxl==3.1.5 --hash=sha256:5282c12b107bffeef825f4617dc029afaf41d0ea60823bbb665ef3079dc79de2
pybind11==2.13.6 --hash=sha256:237c41e29157b962835d356b370ededd57594a26d5894a795960f0047cb5caf5
regex==2024.11.6 --hash=sha256:d1cee317bfc014c2419a76bcc87f071405e3966da434e03e13beb45f8aced1a6
setuptools==75.3.2 --hash=sha256:90ab613b6583fc02d5369cbca13ea26ea0e182d1df2d943ee9cbe81d4c61add9
six==1.17.0 --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274
tqdm==4.67.1 --hash=sha256:26445eca388f82e72884e0d580d5464cd801a3ea01e63e5601bdff9ba6a48de2
nltk==3.9.1 --hash=sha256:4fa26829c5b00715afe3061398a8989dc643b92ce7dd93fb4585a70930d168a1
ENVBUILD_EOF_4435a0cb3eea
  /root/.envbuild/envs/megatronapp/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/megatronapp/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:megatronapp: megatronapp @ 1bed2a720216
# why: The last commit (2025-06-04, "add pipeline example") of the NGC 23.04 README; it vendors
# why: Megatron-LM core_v0.4.0 (38879f8b) with patched training/schedules files. Used from the
# why: checkout; the build makes the unversioned ibverbs/rdmacm/ibumad links prerequisite.sh makes,
# why: then builds and installs the shm_tensor_new_rdma extension (`python setup.py install`, as
# why: published: it needs the image's torch, so no isolated build).
step_git_megatronapp() {
  /root/.envbuild/envs/megatronapp/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatronapp.json"
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
  /root/.envbuild/envs/megatronapp/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-ib-addresses.json"
}

# step patch:cxx11-abi-from-torch: patch cxx11-abi-from-torch
# why: setup.py hard-codes -D_GLIBCXX_USE_CXX11_ABI=0; torch's BuildExtension appends the ABI torch was
# why: built with after the user flags, so the hard-coded value is at best redundant and at worst
# why: conflicting. Dropping it leaves torch's value as the only one (upstream later reads
# why: torch._C._GLIBCXX_USE_CXX11_ABI instead, ecd69f7b).
step_patch_cxx11_abi_from_torch() {
  /root/.envbuild/envs/megatronapp/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-cxx11-abi-from-torch.json"
}

# step build:megatronapp: build megatronapp
# why: published build step for megatronapp
step_build_megatronapp() {
  (cd /root/.envbuild/envs/megatronapp/src/megatronapp && env PATH=/root/.envbuild/envs/megatronapp/bin:"$PATH" bash -ec 'cd /usr/lib/x86_64-linux-gnu && test -e libibverbs.so.1.14.36.0 && ln -sf libibverbs.so.1.14.36.0 libibverbs.so')
  (cd /root/.envbuild/envs/megatronapp/src/megatronapp && env PATH=/root/.envbuild/envs/megatronapp/bin:"$PATH" bash -ec 'cd /usr/lib/x86_64-linux-gnu && test -e librdmacm.so.1.3.36.0 && ln -sf librdmacm.so.1.3.36.0 librdmacm.so')
  (cd /root/.envbuild/envs/megatronapp/src/megatronapp && env PATH=/root/.envbuild/envs/megatronapp/bin:"$PATH" bash -ec 'cd /usr/lib/x86_64-linux-gnu && test -e libibumad.so.3.2.36.0 && ln -sf libibumad.so.3.2.36.0 libibumad.so')
  (cd /root/.envbuild/envs/megatronapp/src/megatronapp && env PATH=/root/.envbuild/envs/megatronapp/bin:"$PATH" bash -ec 'python setup.py install')
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/megatronapp/.envbuild && cat > /root/.envbuild/envs/megatronapp/.envbuild/env.sh <<'ENVBUILD_EOF_6fc4814db158' && chmod 0644 /root/.envbuild/envs/megatronapp/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/megatronapp
export PATH=/root/.envbuild/envs/megatronapp/bin:"$PATH"
ENVBUILD_EOF_6fc4814db158
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/megatronapp/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch apex transformer_engine shm_tensor_new_rdma nltk netifaces
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/megatronapp/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/megatronapp/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/megatronapp/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/megatronapp/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/megatronapp/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/megatronapp/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/megatronapp/.envbuild/smoke/collective.py
  /root/.envbuild/envs/megatronapp/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/megatronapp/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/megatronapp/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-native.json" || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight system-packages environment pip:packages git:megatronapp patch:ib-addresses patch:cxx11-abi-from-torch build:megatronapp env-file import-check smoke)
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
