#!/usr/bin/env bash
# Provision nanogpt on local (host local, facts profile:local),
# rendered by envbuild 0.1.0 from the plan; lock digest 46736243b9e0d3656d2643b0317ee55ab8308c7e90baa1cfcf3faabbd7978e7b.
# Regenerate: envbuild render nanogpt --target local --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  sh -c 'echo "preflight refused this node: $1" >&2; exit 1' sh 'python-absent: Python 3.10 is not on local (found: 3.11.2) and there is no conda/mamba to create it; too-few-gpus: the benchmark needs 1 GPU(s) per node; local has 0'
}

# step environment: venv environment, Python 3.10
# why: recipe asks for Python 3.10; no matching interpreter in the node facts: the executor must find
# why: one
step_environment() {
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild/state
  rm -f /root/.envbuild/envs/nanogpt/pyvenv.cfg /root/.envbuild/envs/nanogpt/bin/python /root/.envbuild/envs/nanogpt/bin/python3 /root/.envbuild/envs/nanogpt/bin/python3.10
  python3.10 -m venv /root/.envbuild/envs/nanogpt
  /root/.envbuild/envs/nanogpt/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip:torch-deps: 20 packages torch needs
# why: torch's locked dependencies (none of them named by the recipe): installed apart so that they
# why: change only with torch
step_pip_torch_deps() {
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild/requirements && cat > /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-torch-deps.txt <<'ENVBUILD_EOF_b3262b93ea74' && chmod 0644 /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-torch-deps.txt
cmake==3.26.4 --hash=sha256:1b92f9f59f48c803106dbdd6750b0f571a0500e25d3a62c42ba84bb7a9240d10
lit==16.0.6 --hash=sha256:84623c9c23b6b14763d637f4e63e6b721b3446ada40bf7001d8fee70b8e77a9a
markupsafe==2.1.3 --hash=sha256:65c1a9bcdadc6c28eecee2c119465aebff8f7a584dd719facdd9e825ec61ab52
jinja2==3.1.2 --hash=sha256:6088930bfe239f0e6710546ab9c19c9ef35e29792895fed6e6e31a023a182a61
mpmath==1.3.0 --hash=sha256:a0b2b9fe80bbcd81a6647ff13108738cfb482d481d826cc0e02f5b35e5c88d2c
networkx==3.1 --hash=sha256:4f33f68cb2afcf86f28a45f43efc27a9386b535d567d2127f8f61d51dec58d36
nvidia-cuda-nvrtc-cu11==11.7.99 --hash=sha256:9f1562822ea264b7e34ed5930567e89242d266448e936b85bc97a3370feabb03
nvidia-cufft-cu11==10.9.0.58 --hash=sha256:222f9da70c80384632fd6035e4c3f16762d64ea7a843829cb278f98b3cb7dd81
nvidia-nccl-cu11==2.14.3 --hash=sha256:5e5534257d1284b8e825bc3a182c6f06acd6eb405e9f89d49340e98cd8f136eb
sympy==1.12 --hash=sha256:c3588cd4295d0c0f603d0f2ae780587e64e2efeedb3521e46b9bb1d08d184fa5
wheel==0.40.0 --hash=sha256:d236b20e7cb522daf2390fa84c55eea81c5c30190f90f29ae2ca1ad8355bf247
nvidia-cublas-cu11==11.10.3.66 --hash=sha256:d32e4d75f94ddfb93ea0a5dda08389bcc65d8916a25cb9f37ac89edaeed3bded
nvidia-cuda-cupti-cu11==11.7.101 --hash=sha256:e0cfd9854e1f2edaa36ca20d21cd0bdd5dcfca4e3b9e130a082e05b33b6c5895
nvidia-cuda-runtime-cu11==11.7.99 --hash=sha256:cc768314ae58d2641f07eac350f40f99dcb35719c4faff4bc458a7cd2b119e31
nvidia-cudnn-cu11==8.5.0.96 --hash=sha256:402f40adfc6f418f9dae9ab402e773cfed9beae52333f6d86ae3107a1b9527e7
nvidia-curand-cu11==10.2.10.91 --hash=sha256:eecb269c970fa599a2660c9232fa46aaccbf90d9170b96c462e13bcb4d129e2c
nvidia-cusolver-cu11==11.4.0.1 --hash=sha256:72fa7261d755ed55c0074960df5904b65e2326f7adce364cbe4945063c1be412
nvidia-cusparse-cu11==11.7.4.91 --hash=sha256:a3389de714db63321aa11fbec3919271f415ef19fda58aed7f2ede488c32733d
nvidia-nvtx-cu11==11.7.91 --hash=sha256:b22c64eee426a62fc00952b507d6d29cf62b4c9df7a480fcc417e540e05fd5ac
triton==2.0.0 --hash=sha256:38806ee9663f4b0f7cd64790e96c579374089e58f49aac4a6608121aa55e2505
ENVBUILD_EOF_b3262b93ea74
  /root/.envbuild/envs/nanogpt/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-torch-deps.txt --require-hashes --no-deps
}

# step pip:torch: torch 2.0.1
# why: torch from the index that carries the variant matched to this node
step_pip_torch() {
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild/requirements && cat > /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-torch.txt <<'ENVBUILD_EOF_59117aa9f5f6' && chmod 0644 /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-torch.txt
torch==2.0.1 --hash=sha256:8ced00b3ba471856b993822508f77c98f48a458623596a4c43136158781e306a
ENVBUILD_EOF_59117aa9f5f6
  /root/.envbuild/envs/nanogpt/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-torch.txt --require-hashes --no-deps
}

# step pip:packages: 48 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild/requirements && cat > /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_a7fb5eef7420' && chmod 0644 /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-packages.txt
appdirs==1.4.4 --hash=sha256:a841dacd6b99318a741b166adb07e19ee71a274450e68237b4650ca1055ab128
async-timeout==4.0.2 --hash=sha256:8ca1e4fcf50d07413d66d1a5e416e42cfdf5851c981d679a09851a6853383b3c
attrs==23.1.0 --hash=sha256:1f28b4522cdc2fb4256ac1a020c78acf9cba2c6b461ccd2c126f3aa8e8335d04
certifi==2023.5.7 --hash=sha256:c6c2e98f5c7869efca1f8916fed228dd91539f9f1b444c314c06eef02980c716
charset-normalizer==3.1.0 --hash=sha256:75f2568b4189dda1c567339b48cba4ac7384accb9c2a7ed655cd86b04055c795
click==8.1.3 --hash=sha256:bb4d8133cb15a609f44e8213d9b391b0809795062913b383c62be0ee95b1db48
dill==0.3.6 --hash=sha256:a07ffd2351b8c678dfc4a856a3005f8067aea51d6ba6c700796a4d9e280f39f0
filelock==3.12.2 --hash=sha256:cbb791cdea2a72f23da6ac5b5269ab0a0d161e9ef0100e653b69049a7706d1ec
frozenlist==1.3.3 --hash=sha256:783263a4eaad7c49983fe4b2e7b53fa9770c136c270d2d4bbb6d2192bf4d9caf
aiosignal==1.3.1 --hash=sha256:f8376fb07dd1e86a584e4fcdec80b36b7f81aac666ebc724e2c090300dd83b17
idna==3.4 --hash=sha256:90b77e79eaa3eba6de819a0c442c0b4ceefc341a7a2ab77d7562bf49f425c5c2
multidict==6.0.4 --hash=sha256:36c63aaa167f6c6b04ef2c85704e93af16c11d20de1d133e39de6a0e84582a93
multiprocess==0.70.14 --hash=sha256:7dc1f2f6a1d34894c8a9a013fbc807971e336e7cc3f3ff233e61b9dc679b3b5c
numpy==1.25.0 --hash=sha256:4aedd08f15d3045a4e9c648f1e04daca2ab1044256959f1f95aafeeb3d794c16
packaging==23.1 --hash=sha256:994793af429502c4ea2ebf6bf664629d07c1a9fe974af92966e4b8d2df7edc61
pathtools==0.1.2 --hash=sha256:7c35c5421a39bb82e58018febd90e3b6e5db34c5443aaaf742b3f33d4655f1c0
protobuf==4.23.3 --hash=sha256:3b01a5274ac920feb75d0b372d901524f7e3ad39c63b1a2d55043f3887afe0c1
psutil==5.9.5 --hash=sha256:89518112647f1276b03ca97b65cc7f64ca587b1eb0278383017c2a0dcc26cbe4
pyarrow==12.0.1 --hash=sha256:2d3c4cbbf81e6dd23fe921bc91dc4619ea3b79bc58ef10bce0f49bdafb103daf
pytz==2023.3 --hash=sha256:a151b3abb88eda1d4e34a9814df37de2a80e301e68ba0fd856fb9b46bfbbbffb
pyyaml==6.0 --hash=sha256:f84fbc98b019fef2ee9a1cb3ce93e3187a6df0b2538a651bfb890254ba9f90b5
regex==2023.6.3 --hash=sha256:4959e8bcbfda5146477d21c3a8ad81b185cd252f3d0d6e4724a5ef11c012fb06
safetensors==0.3.1 --hash=sha256:5c115951b3a865ece8d98ee43882f2fd0a999c0200d6e6fec24134715ebe3b57
setproctitle==1.3.2 --hash=sha256:e00c9d5c541a2713ba0e657e0303bf96ddddc412ef4761676adc35df35d7c246
setuptools==68.0.0 --hash=sha256:11e52c67415a381d10d6b462ced9cfb97066179f0e871399e006c4ab101fc85f
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
docker-pycreds==0.4.0 --hash=sha256:7266112468627868005106ec19cd0d722702d2b7d5912a28e19b826c3d37af49
python-dateutil==2.8.2 --hash=sha256:961d03dc3453ebbc59dbdea9e4e11c5651520a876d0f4db161e8674aae935da9
smmap==5.0.0 --hash=sha256:2aba19d6a040e78d8b09de5c57e96207b09ed71d8e55ce0959eeee6c8e190d94
gitdb==4.0.10 --hash=sha256:c286cf298426064079ed96a9e4a9d39e7f3e9bf15ba60701e95f5492f28415c7
gitpython==3.1.31 --hash=sha256:f04893614f6aa713a60cbbe1e6a97403ef633103cdd0ef5eb6efe0deb98dbe8d
tokenizers==0.13.3 --hash=sha256:a4d53976079cff8a033f778fb9adca2d9d69d009c02fa2d71a878b5f3963ed30
tqdm==4.65.0 --hash=sha256:c4f53a17fe37e132815abceec022631be8ffe1b9381c2e6e30aa70edc99e9671
typing-extensions==4.6.3 --hash=sha256:88a4153d8505aabbb4e13aacb7c486c2b4a33ca3b3f807914a9b4c844c471c26
tzdata==2023.3 --hash=sha256:7e65763eef3120314099b6939b5546db7adce1e7d6f2e179e3df563c70511eda
pandas==2.0.2 --hash=sha256:dd46bde7309088481b1cf9c58e3f0e204b9ff9e3244f441accd220dd3365ce7c
urllib3==2.0.3 --hash=sha256:48e7fafa40319d358848e1bc6809b208340fafe2096f1725d05d67443d0483d1
requests==2.31.0 --hash=sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f
sentry-sdk==1.26.0 --hash=sha256:0c9f858337ec3781cf4851972ef42bba8c9828aea116b0dbed8f38c5f9a1896c
tiktoken==0.4.0 --hash=sha256:5727d852ead18b7927b8adf558a6f913a15c7766725b23dbe21d22e243041b28
wandb==0.15.4 --hash=sha256:9018565177e1be14d7d0dd470c583206031c6027c32a98c57fa3bb83955143d7
xxhash==3.2.0 --hash=sha256:561076ca0dcef2fbc20b2bc2765bff099e002e96041ae9dbe910a863ca6ee3ea
yarl==1.9.2 --hash=sha256:891c0e3ec5ec881541f6c5113d8df0315ce5440e244a716b95f2525b7b9f3608
aiohttp==3.8.4 --hash=sha256:c844fd628851c0bc309f3c801b3a3d58ce430b2ce5b359cd918a5a76d0b20cb5
fsspec==2023.6.0 --hash=sha256:1cbad1faef3e391fba6dc005ae9b5bdcbf43005c9167ce78c915549c352c869a
huggingface-hub==0.15.1 --hash=sha256:05b0fb0abbf1f625dfee864648ac3049fe225ac4371c7bafaca0c2d3a2f83445
datasets==2.13.1 --hash=sha256:844d8dbc1759e0b6b8e5063af019dc95d6af07ea075002b03323a280bf8d53f6
transformers==4.30.2 --hash=sha256:c332e3a3097f9ed89ce556b403251235931c00237b8bc2d7adaa19d226c13f1d
ENVBUILD_EOF_a7fb5eef7420
  /root/.envbuild/envs/nanogpt/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/nanogpt/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:nanogpt: nanogpt @ eba36e84649f
# why: The repository at the published commit; no instruction installs the tree (README.md:15 installs
# why: its dependencies only): its scripts run from the checkout, bench.py and train.py import model.py
# why: beside them and exec configurator.py from the working folder (bench.py:21).
step_git_nanogpt() {
  /root/.envbuild/envs/nanogpt/bin/python "$FILES/envbuild_node" "$FILES/actions/git-nanogpt.json"
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild && cat > /root/.envbuild/envs/nanogpt/.envbuild/env.sh <<'ENVBUILD_EOF_d1f5d68bcb96' && chmod 0644 /root/.envbuild/envs/nanogpt/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/nanogpt
export PATH=/root/.envbuild/envs/nanogpt/bin:"$PATH"
ENVBUILD_EOF_d1f5d68bcb96
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/nanogpt/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch numpy transformers datasets tiktoken wandb tqdm
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/nanogpt/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/nanogpt/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/nanogpt/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/nanogpt/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/nanogpt/.envbuild/smoke/collective.py
  /root/.envbuild/envs/nanogpt/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/nanogpt/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip:torch-deps pip:torch pip:packages git:nanogpt env-file import-check smoke)
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
