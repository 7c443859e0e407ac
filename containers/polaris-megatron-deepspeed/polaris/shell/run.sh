#!/usr/bin/env bash
# Provision polaris-megatron-deepspeed on polaris (host polaris, facts profile:polaris),
# rendered by envbuild 0.1.0 from the plan; lock digest 8cae541d5d961026c57e4665ebecd1ceb107792639e7d33a0c3400e1014f9809.
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
  rm -f /root/.envbuild/envs/polaris-megatron-deepspeed/pyvenv.cfg /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python3 /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python3.10
  bash -c 'module load "$1" && shift && exec "$@"' bash conda/2023-10-04 python3 -c 'import sys, venv; want = sys.argv[1]; have = "%d.%d" % sys.version_info[:2]; sys.exit("envbuild: the module python3 (" + sys.executable + ") is Python " + have + ", the recipe asks for " + want) if have != want else venv.main(sys.argv[2:])' 3.10 --system-site-packages /root/.envbuild/envs/polaris-megatron-deepspeed
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
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

# step pip:packages: 53 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_326f5f9a045c' && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages.txt
antlr4-python3-runtime==4.9.3 --hash=sha256:f224469b4168294902bb1efa80a8bf7855f24c99aef99cbefc1bcd3cce77881b
certifi==2023.11.17 --hash=sha256:e036ab49d5b79556f99cfc2d9320b34cfbe5be05c5871b51de9329f0603b0474
charset-normalizer==3.3.2 --hash=sha256:8465322196c8b4d7ab6d1e049e4c5cb460d0394da4a27d23cc242fbf0034b6b5
colorlog==6.8.2 --hash=sha256:4dcbb62368e2800cb3c5abd348da7e53f6c362dda502ec27c560b2e58a66bd33
cycler==0.12.1 --hash=sha256:85cef7cff222d8644161529808465972e51340599459b8ac3ccbac5a854e0d30
editables==0.5 --hash=sha256:61e5ffa82629e0d8bfe09bc44a07db3c1ab8ed1ce78a6980732870f19b5e7d4c
einops==0.7.0 --hash=sha256:0f3096f26b914f465f6ff3c66f5478f9a5e380bb367ffc6493a68143fbbf1fd1
fonttools==4.47.2 --hash=sha256:f83a4daef6d2a202acb9bf572958f91cfde5b10c8ee7fb1d09a4c81e5d851fd8
idna==3.6 --hash=sha256:c05567e9c24a6b9faaa835c4821bad0590fbb9d5779e7caa6e1cc4978e7eb24f
joblib==1.3.2 --hash=sha256:ef4331c65f239985f3f2220ecc87db222f08fd22097a3dd5698f693875f8cbb9
kiwisolver==1.4.5 --hash=sha256:ec20916e7b4cbfb1f12380e46486ec4bcbaa91a9c448b97023fde0d5bbf9e4ff
mdurl==0.1.2 --hash=sha256:84008a41e51615a49fc9966191ff91509e3c40b939176e643fd50a5c2196b8f8
markdown-it-py==3.0.0 --hash=sha256:355216845c60bd96232cd8d8c40e8f9765cc86f46880e43a8fd22dc1a1a8cab1
numpy==1.26.3 --hash=sha256:bdd2b45bf079d9ad90377048e2747a0c82351989a2165821f0c96831b4a2a54b
contourpy==1.2.0 --hash=sha256:b69303ceb2e4d4f146bf82fda78891ef7bcd80c41bf16bfca3d0d7eb545448aa
ml-dtypes==0.3.2 --hash=sha256:961134ea44c7b8ca63eda902a44b58cd8bd670e21d62e255c81fba0a8e70d9b7
opt-einsum==3.3.0 --hash=sha256:2455e59e3947d3c275477df7f5205b30635e266fe6dc300e3d9f9646bfcea147
packaging==23.2 --hash=sha256:8c491190033a9af7e1d931d0b5dacc2ef47509b34dd0de67ed209b5203fc88c7
pathspec==0.12.1 --hash=sha256:a0d503e138a4c123b27490a4f7beda6a01c6f288df0e4a8b79c7eb0dc7b4cc08
pillow==10.2.0 --hash=sha256:da2b52b37dad6d9ec64e653637a096905b258d2fc2b984c41ae7d08b938a67e4
plotext==5.2.8 --hash=sha256:7364cf72e6c9bffaf96158340fd2e0058faf404edbbc1e7a2aed421c8638d475
pluggy==1.4.0 --hash=sha256:7db9f7b503d67d1c5b95f59773ebb58a8c1c288129a88665838012cfb07b8981
pygments==2.17.2 --hash=sha256:b27c2826c47d0f3219f29554824c30c5e8945175d888647acd804ddd04af846c
pyparsing==3.1.1 --hash=sha256:32c7c0b711493c72ff18a981d24f28aaf9c1fb7ed5e9667c9e84e3db623bdbfb
pytz==2023.3.post1 --hash=sha256:ce42d816b81b68506614c11e8937d3aa9e41007ceb50bfdcb0749b921bf646c7
pyyaml==6.0.1 --hash=sha256:ba336e390cd8e4d1739f42dfe9bb83a3cc2e80f567d8805e11b46f4a943f5515
omegaconf==2.3.0 --hash=sha256:7b4df175cdb08ba400f45cae3bdcae7ba8365db4d165fc65fd04b050ab63b46b
hydra-core==1.3.2 --hash=sha256:fa0238a9e31df3373b35b0bfb672c34cc92718d21f81311d8996a16de1141d8b
hydra-colorlog==1.2.0 --hash=sha256:33d05fc11ca9bc7a5d69cfb3c8fb395a1bc52fa1dfe7aca6a6f5ffb57f6e7c4b
rich==13.7.0 --hash=sha256:6da14c108c4866ee9520bbffa71f6fe3962e193b7da68720583850cd4548e235
scipy==1.12.0 --hash=sha256:5e32847e08da8d895ce09d108a494d9eb78974cf6de23063f93306a3e419960c
jax==0.4.23 --hash=sha256:a7a07ccd1577111e3b82378c79a8ed0f9d6613b1e98fb6bf3c0b459198f73eaa
jaxlib==0.4.23 --hash=sha256:7275fbe5a489c683c5502603d55e508323cda2f4bd9521aa8383c674fb0ab2f3
setuptools==69.0.3 --hash=sha256:385eb4edd9c9d5c17540511303e39a147ce2fc04bc55289c322b9e5904fe2c05
sh==2.0.6 --hash=sha256:ced8f2e081a858b66a46ace3703dec243779abbd5a1887ba7e3c34f34da70cd2
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
python-dateutil==2.8.2 --hash=sha256:961d03dc3453ebbc59dbdea9e4e11c5651520a876d0f4db161e8674aae935da9
matplotlib==3.8.2 --hash=sha256:4e208f46cf6576a7624195aa047cb344a7f802e113bb1a06cfd4bee431de5e31
colormaps==0.4.1 --hash=sha256:b711a6701b65b74e28bec5b1b110ff21478d2d8484d1774987a90026f3557b46
tomli==2.0.1 --hash=sha256:939de3e7a6161af0c887ef91b7d41a53e7c5a1ca976325f429cb46ea9bc30ecc
trove-classifiers==2024.1.8 --hash=sha256:3c1ff4deb10149c7e39ede6e5bbc107def64362ef1ee7590ec98d71fb92f1b6a
hatchling==1.21.1 --hash=sha256:21e8c13f8458b219a91cb84e5b61c15bf786695d1c4fabc29e91e78f94bfe892
typeguard==2.13.3 --hash=sha256:5e3e3be01e887e7eafae5af63d1f36c849aaa94e3a0112097312aabfa16284f1
typing-extensions==4.9.0 --hash=sha256:af72aea155e91adfc61c3ae9e0e342dbc0cba726d6cba4b6c72c1f34e47291cd
jaxtyping==0.2.25 --hash=sha256:503772cf985ff50bd160d0661266e1628da47cc8b9a302de16f230e07f5ac119
setuptools-scm==8.0.4 --hash=sha256:b47844cd2a84b83b3187a5782c71128c28b4c94cad8bfb871da2784a5cb54c4f
tzdata==2023.4 --hash=sha256:aa3ace4329eeacda5b7beb7ea08ece826c28d761cda36e747cfbf97996d39bf3
pandas==2.2.0 --hash=sha256:20404d2adefe92aed3b38da41d0847a143a09be982a31b85bc7dd565bdba0f4e
seaborn==0.13.2 --hash=sha256:636f8336facf092165e27924f223d3c62ca560b1f2bb5dff7ab7fad265361987
urllib3==2.1.0 --hash=sha256:55901e917a5896a349ff771be919f8bd99aff50b79fe58fec595eb37bbc56bb3
requests==2.31.0 --hash=sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f
xarray==2024.1.1 --hash=sha256:0bec81303b088c8df4f075e1579c00cfd7e5069688e4434007f0b8d7df17fc1c
ENVBUILD_EOF_326f5f9a045c
  env FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS="$(( $(nproc) < 8 ? $(nproc) : 8 ))" /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
  mkdir -p /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements && cat > /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt <<'ENVBUILD_EOF_e155264da1af' && chmod 0644 /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt
flash-attn==2.4.2
ENVBUILD_EOF_e155264da1af
  env FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS="$(( $(nproc) < 8 ? $(nproc) : 8 ))" /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/polaris-megatron-deepspeed/.envbuild/requirements/pip-packages-no-isolation.txt --no-build-isolation --no-deps
}

# step git:ambivalent: ambivalent @ e130acf2ae47
# why: git dependency of ezpz, pinned by the lock (ezpz declares no ref: the default branch as of
# why: resolve_as_of 2024-01-26)
step_git_ambivalent() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/git-ambivalent.json"
}

# step install:ambivalent: install ambivalent (wheel)
# why: non-editable install, as the published instructions require
step_install_ambivalent() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/polaris-megatron-deepspeed/src/ambivalent
}

# step git:enrich: enrich @ 68bf148e723c
# why: git dependency of ezpz, pinned by the lock (ezpz declares no ref: the default branch as of
# why: resolve_as_of 2024-01-26)
step_git_enrich() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/git-enrich.json"
}

# step install:enrich: install enrich (wheel)
# why: non-editable install, as the published instructions require
step_install_enrich() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/polaris-megatron-deepspeed/src/enrich
}

# step git:megatron-deepspeed: megatron-deepspeed @ e4bac7019db9
# why: The commit where ALCF/README.md with this recipe's steps was written (scripts call
# why: pretrain_gpt.py). f51f1fa1 (2024-02-01) is the last commit with the same layout but renames the
# why: entry script to pretrain_gpt_alcf.py, which the README does not mention. Clone only: the scripts
# why: source ALCF/*.sh by relative path and run from the repo root.
step_git_megatron_deepspeed() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatron-deepspeed.json"
}

# step git:ezpz: ezpz @ ae490bd966be
# why: `pip install git+https://github.com/saforem2/ezpz` in the README; ae490bd9 (2024-01-28) is the
# why: commit contemporary with it (hatchling, provides ezpz.dist setup_torch / get_world_size /
# why: setup_wandb / get_rank). PyPI's "ezpz" is an unrelated 2016 package, so never by name.
step_git_ezpz() {
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/git-ezpz.json"
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
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/polaris-megatron-deepspeed/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-native.json" || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:packages git:ambivalent install:ambivalent git:enrich install:enrich git:megatron-deepspeed git:ezpz install:ezpz env-file import-check smoke)
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
