#!/usr/bin/env bash
# Provision gpt-neox on local (host local, facts profile:local),
# rendered by envbuild 0.1.0 from the plan; lock digest 3e56805e1c96ef2d68187ea61d6ef3a19d07dd4ded2f08301e53a46ae9d2ee3d.
# Regenerate: envbuild render gpt-neox --target local --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  sh -c 'echo "preflight refused this node: $1" >&2; exit 1' sh 'rdma-needs-infiniband: the recipe builds/uses RDMA (ibverbs-utils, perftest, rdma-core) but local shows no InfiniBand device; container-runtime-missing: the recipe runs in nvidia/cuda:11.1.1-devel-ubuntu20.04 but local has no container runtime; too-few-gpus: the benchmark needs 1 GPU(s) per node; local has 0'
}

# step system-packages: System packages
# why: native prerequisites named by the published instructions
step_system_packages() {
  env DEBIAN_FRONTEND=noninteractive apt-get update -q
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git python3 python3-dev libpython3-dev python3-pip sudo pdsh htop llvm-9-dev tmux zstd software-properties-common build-essential autotools-dev nfs-common cmake g++ gcc curl wget vim less unzip iftop iotop ca-certificates ssh rsync iputils-ping net-tools libcupti-dev libmlx4-1 infiniband-diags ibutils ibverbs-utils rdmacm-utils perftest rdma-core nano
}

# step environment: container environment, Python 3.8
# why: recipe asks for Python 3.8; inside the image nvidia/cuda:11.1.1-devel-ubuntu20.04: a venv with
# why: --system-site-packages over the image's python3 keeps its preinstalled packages and takes the
# why: plan's
step_environment() {
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/state
  rm -f /root/.envbuild/envs/gpt-neox/pyvenv.cfg /root/.envbuild/envs/gpt-neox/bin/python /root/.envbuild/envs/gpt-neox/bin/python3 /root/.envbuild/envs/gpt-neox/bin/python3.8
  python3 -m venv --system-site-packages /root/.envbuild/envs/gpt-neox
  /root/.envbuild/envs/gpt-neox/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==24.0, wheel==0.45.1
# why: pip pinned to 24.0 so build-option syntax is known; deepspeed, lm_dataformat, apex built with
# why: --no-build-isolation: setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and
# why: editable installs; without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/requirements && cat > /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_93b40a7a3b9c' && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-tooling.txt
pip==24.0 --hash=sha256:ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_93b40a7a3b9c
  /root/.envbuild/envs/gpt-neox/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:torch: torch 1.8.1+cu111
# why: torch from the index that carries the variant matched to this node; without a hash in the lock:
# why: torch
step_pip_torch() {
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/requirements && cat > /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-torch-unverified.txt <<'ENVBUILD_EOF_82a612b77244' && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-torch-unverified.txt
torch==1.8.1+cu111
ENVBUILD_EOF_82a612b77244
  /root/.envbuild/envs/gpt-neox/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-torch-unverified.txt --no-deps --find-links=https://download.pytorch.org/whl/torch_stable.html
}

# step pip:packages: 102 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/requirements && cat > /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_23b1f6725a9d' && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-packages.txt
absl-py==1.4.0 --hash=sha256:0d3fe606adfa4f7db64792dd4c7aee4ee0c38ab75dfd353b7a83ed3e957fcb47
async-timeout==4.0.2 --hash=sha256:8ca1e4fcf50d07413d66d1a5e416e42cfdf5851c981d679a09851a6853383b3c
attrs==22.2.0 --hash=sha256:29e95c7f6778868dbd49170f98f8818f78f3dc5e0e37c0b1f474e3561b240836
certifi==2022.12.7 --hash=sha256:4ad3232f5e926d6718ec31cfc1fcadfde020920e278684144551c91769c7bc18
chardet==5.1.0 --hash=sha256:362777fb014af596ad31334fde1e8c327dfdb076e1960d1694662d46a6917ab9
charset-normalizer==3.1.0 --hash=sha256:de5695a6f1d8340b12a5d6d4484290ee74d61e467c39ff03b39e30df62cf83a0
click==8.1.3 --hash=sha256:bb4d8133cb15a609f44e8213d9b391b0809795062913b383c62be0ee95b1db48
colorama==0.4.6 --hash=sha256:4f1d9991f5acc0ca119f9d443620b77f9d6b33703e51011c16baf57afb285fc6
configparser==5.3.0 --hash=sha256:b065779fd93c6bf4cee42202fa4351b4bb842e96a3fb469440e484517a49b9fa
cxxfilt==0.3.0 --hash=sha256:774e85a8d0157775ed43276d89397d924b104135762d86b3a95f81f203094e07
dill==0.3.6 --hash=sha256:a07ffd2351b8c678dfc4a856a3005f8067aea51d6ba6c700796a4d9e280f39f0
einops==0.3.0 --hash=sha256:a91c6190ceff7d513d74ca9fd701dfa6a1ffcdd98ea0ced14350197c07f75c73
exceptiongroup==1.1.0 --hash=sha256:327cbda3da756e2de031a3107b81ab7b3770a602c4d16ca618298c526f4bec1e
fastrlock==0.8.1 --hash=sha256:3e4c0ada1ce907a5616046eb219eb40ea0ff2bb27f4da703925c32af1537f43a
filelock==3.9.0 --hash=sha256:f58d535af89bb9ad5cd4df046f741f8553a418c01a7856bf0d173bbc9f6bd16d
frozenlist==1.3.3 --hash=sha256:9ac5995f2b408017b0be26d4a1d7c61bce106ff3d9e3324374d66b5964325448
aiosignal==1.3.1 --hash=sha256:f8376fb07dd1e86a584e4fcdec80b36b7f81aac666ebc724e2c090300dd83b17
idna==3.4 --hash=sha256:90b77e79eaa3eba6de819a0c442c0b4ceefc341a7a2ab77d7562bf49f425c5c2
iniconfig==2.0.0 --hash=sha256:b6a85871a79d2e3b22d2d1b94ac2824226a63c6b741c88f7ae975f18b6778374
joblib==1.2.0 --hash=sha256:091138ed78f800342968c523bdde947e7a305b8594b910a0fea2ab83c3c6d385
jsonlines==3.1.0 --hash=sha256:632f5e38f93dfcb1ac8c4e09780b92af3a55f38f26e7c47ae85109d420b6ad39
lxml==4.9.2 --hash=sha256:8e20cb5a47247e383cf4ff523205060991021233ebd6f924bca927fcf25cf86f
mbstrdecoder==1.1.2 --hash=sha256:27dd749eb46484a3d032aa1cea80743cd094922245764579e0153f70813845de
mpi4py==3.0.3 --hash=sha256:012d716c8b9ed1e513fcc4b18e5af16a8791f51e6d1716baccf988ad355c5a1f
multidict==6.0.4 --hash=sha256:cc8e1d0c705233c5dd0c5e6460fbad7827d5d36f310a0fadfd45cc3029762258
multiprocess==0.70.14 --hash=sha256:93a8208ca0926d05cdbb5b9250a604c401bed677579e96c14da3090beb798193
ninja==1.11.1 --hash=sha256:817e2aee2a4d28a708a67bcfba1817ae502c32c6d8ef80e50d63b0f23adf3a08
numpy==1.22.0 --hash=sha256:f71d57cc8645f14816ae249407d309be250ad8de93ef61d9709b45a0ddf4050c
cupy-cuda111==8.6.0 --hash=sha256:51a52856ebec95230b895e2d2c6eb5e386c5f78e10ba9eface720230dc924694
numexpr==2.8.4 --hash=sha256:6c368aa35ae9b18840e78b05f929d3a7b3abccdba9630a878c7db74ca2368339
nvidia-ml-py==11.495.46 --hash=sha256:8a18e5c77716ffebd8eff3b2bdc6324c9825b51630280655d5478ff463f17827
packaging==23.0 --hash=sha256:714ac14496c3e68c99c29b00845f7a2b85f3bb6f1078fd9f72fd20f0570002b2
pathtools==0.1.2 --hash=sha256:7c35c5421a39bb82e58018febd90e3b6e5db34c5443aaaf742b3f33d4655f1c0
pathvalidate==2.5.2 --hash=sha256:e39a4dfacdba70e3a96d3e4c6ff617a39e991cf242e6e1f2017f1f67c3408d33
pip==23.0.1 --hash=sha256:236bcb61156d76c4b8a05821b988c7b8c35bf0da28a4b614e8d6ab5212c25c6f
pluggy==1.0.0 --hash=sha256:74134bbf457f031a36d68416e1509f34bd5ccc019f0bcc952c7b909d06b37bd3
portalocker==2.7.0 --hash=sha256:a07c5b4f3985c3cf4798369631fb7011adb498e2a46d8440efc75a8f29a0f983
protobuf==3.20.3 --hash=sha256:44246bab5dd4b7fbd3c0c80b6f16686808fab0e4aca819ade6e8d294a29c7050
psutil==5.9.4 --hash=sha256:54c0d3d8e0078b7666984e11b12b88af2db11d11249a8ac8920dd5ef68a66e08
pyarrow==11.0.0 --hash=sha256:8f40be0d7381112a398b93c45a7e69f60261e7b0269cc324e9f739ce272f4f70
pybind11==2.6.2 --hash=sha256:2d8aebe1709bc367e34e3b23d8eccbf3f387ee9d5640548c6260d33b59f02405
pycryptodomex==3.17 --hash=sha256:78f0ddd4adc64baa39b416f3637aaf99f45acb0bcdc16706f0cc7ebfc6f10109
pytz==2022.7.1 --hash=sha256:78f4f37d8198e0627c5f1143240bb0206b8691d8d7ac6d78fee88b78733f8c4a
pyyaml==6.0 --hash=sha256:277a0ef2981ca40581a47093e9e2d13b3f1fbbeffae064c1d21bfceba2030287
regex==2022.10.31 --hash=sha256:20f61c9944f0be2dc2b75689ba409938c14876c19d02f7585af4460b6a21403e
rehash==1.0.1 --hash=sha256:bbce1e17887dad67317d3e59cb091be8e130f1a9e35e3f0129d5df1b5896a869
sacrebleu==1.5.0 --hash=sha256:7c978b7fc47f26592f8c3213bf1fd66044c57e36c22449f3ad04b983d35b6527
scipy==1.10.1 --hash=sha256:07c3457ce0b3ad5124f98a86533106b643dd811dd61b548e78cf4c8786652f6f
sentencepiece==0.1.97 --hash=sha256:923ee4af16dbae1f2ab358ed09f8a0eb89e40a8198a8b343bf54181482342721
setuptools==67.5.1 --hash=sha256:1c39d42bda4cb89f7fdcad52b6762e3c309ec8f8715b27c684176b7d71283242
pycountry==22.3.5 --hash=sha256:b2163a246c585894d808f18783e19137cb70a0c18fb36748dc01fc6f109c1646
shortuuid==1.0.11 --hash=sha256:27ea8f28b1bd0bf8f15057a3ece57275d2059d2b0bb02854f02189962c13b6aa
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
docker-pycreds==0.4.0 --hash=sha256:7266112468627868005106ec19cd0d722702d2b7d5912a28e19b826c3d37af49
promise==2.3 --hash=sha256:dfd18337c523ba4b6a58801c164c1904a9d4d1b1747c7d5dbf45b693a49d93d0
python-dateutil==2.8.2 --hash=sha256:961d03dc3453ebbc59dbdea9e4e11c5651520a876d0f4db161e8674aae935da9
pandas==1.5.3 --hash=sha256:565fa34a5434d38e9d250af3c12ff931abaf88050551d9fbcdfafca50d62babf
smmap==5.0.0 --hash=sha256:2aba19d6a040e78d8b09de5c57e96207b09ed71d8e55ce0959eeee6c8e190d94
gitdb==4.0.10 --hash=sha256:c286cf298426064079ed96a9e4a9d39e7f3e9bf15ba60701e95f5492f28415c7
gitpython==3.1.31 --hash=sha256:f04893614f6aa713a60cbbe1e6a97403ef633103cdd0ef5eb6efe0deb98dbe8d
sqlitedict==2.1.0 --hash=sha256:03d9cfb96d602996f1d4c2db2856f1224b96a9c431bdd16e78032a72940f9e8c
subprocess32==3.5.4 --hash=sha256:eb2937c80497978d181efa1b839ec2d9622cf9600a039a79d0e108d1f9aec79d
tcolorpy==0.1.2 --hash=sha256:88b1a5c1f4d14fa0a3c9fb97d93f84f0540c7a0e3f3957b1967b1b8ea93dbdbc
tensorboardx==1.8 --hash=sha256:f52e59b38b4cdf83384f3fce067bcaf2d2847619f9f533394df0de3b5a71ab8e
threadpoolctl==3.1.0 --hash=sha256:8b99adda265feb6773280df41eece7b2e6561b772d21ffd52e372f999024907b
scikit-learn==1.2.1 --hash=sha256:5b2c5d9930ced2b7821ad936b9940706ccb5471d89b8a516bb641cec87257d1c
tokenizers==0.12.1 --hash=sha256:419d113e3bcc4fe20a313afc47af81e62906306b08fe1601e1443d747d46af1f
tomli==2.0.1 --hash=sha256:939de3e7a6161af0c887ef91b7d41a53e7c5a1ca976325f429cb46ea9bc30ecc
pytest==7.2.2 --hash=sha256:130328f552dcfac0b1cec75c12e3f005619dc5f874f0a06e8ff7263f0ee6225e
tqdm==4.65.0 --hash=sha256:c4f53a17fe37e132815abceec022631be8ffe1b9381c2e6e30aa70edc99e9671
nltk==3.8.1 --hash=sha256:fd5c9109f976fa86bcadba8f91e47f5e9293bd034474752e92a520f81c93dda5
rouge-score==0.1.2 --hash=sha256:c7d4da2683e68c9abf0135ef915d63a46643666f848e558a1b9f7ead17ff0f04
tqdm-multiprocess==0.0.11 --hash=sha256:3ebdf03e7a675150fa0bbceaa9c3c64b8cb556e9ffafa4fe6c078e51820524aa
triton==0.4.2 --hash=sha256:7103e9ffa8a1052547c3ecce0df010fc7c590c88658f7518308e2873b79d2878
typepy==1.3.0 --hash=sha256:cf1913982969cf6348152c4a5feec08e324addd99670999e57cdb3ad87a61e9a
dataproperty==0.55.0 --hash=sha256:a8f29175950f4b2c33a387aa3809130d87b9a8d3b92a916c906c49efdb566b32
tabledata==1.3.1 --hash=sha256:73e610c378670a2b9bb80e56cece24427d18c8672a36c80fcdf2a3753b19642b
pytablewriter==0.64.2 --hash=sha256:c46d1ddc40ef4d084213a86f8626cee33b3aa0119535aa8555da64cb5b65e382
typing-extensions==4.5.0 --hash=sha256:fb33085c39dd998ac16d1431ebc293a8b3eedd00fd4a32de0ff79002c19511b4
ujson==5.7.0 --hash=sha256:b6a6961fc48821d84b1198a09516e396d56551e910d489692126e90bf4887d29
urllib3==1.26.14 --hash=sha256:75edcdc2f7d85b137124a6c3c9fc3933cdeaa12ecb9a6a959f22797a0feca7e1
blobfile==2.0.1 --hash=sha256:6f51b3e948f30a92e734a974b24fcd0f6a51841fd083de968899231481358da2
requests==2.28.2 --hash=sha256:64299f4909223da747622c030b781c0d7811e359c37124b4bd368fb8c6518baa
best-download==0.0.9 --hash=sha256:8f4f80c27a5add4806793e118c0cb4f26be4aaa2fe6506705b8fc0fcf75f77d7
huggingface-hub==0.11.0 --hash=sha256:1f540c6d57cb1684d3578d7bf2d35041a5145b17e8af932505db7f4fbcc7640d
responses==0.18.0 --hash=sha256:15c63ad16de13ee8e7182d99c9334f64fd81f1ee79f90748d527c28f7ca9dd51
sentry-sdk==1.16.0 --hash=sha256:633edefead34d976ff22e7edc367cdf57768e24bc714615ccae746d9d91795ae
tiktoken==0.1.2 --hash=sha256:f972f2da4a607b3bcce928d1a9491289bfc6113810477be2e709ae68359435d8
transformers==4.24.0 --hash=sha256:b7ab50039ef9bf817eff14ab974f306fd20a72350bdc9df3a858fd009419322e
wandb==0.10.28 --hash=sha256:609f2605ec82f846490a2bdd9d01fa947b1892a76133cbb80c41501e5dfda763
wcwidth==0.2.6 --hash=sha256:795b138f6875577cd91bba52baf9e445cd5118fd32723b460e30a0af30ea230e
blessed==1.20.0 --hash=sha256:0c542922586a265e699188e52d5f5ac5ec0dd517e5a1041d90d2bbf23f906058
ftfy==6.0.1 --hash=sha256:9eb68533eb2a6124e96ed7f63049e6c519194fda3fae92629b5e0b5753cb2c8f
gpustat==1.0.0 --hash=sha256:581e8ff858c32c95a322bb8f03f1d9dc3d177b4ecb33ddcbed2c373c67f4e3f1
xxhash==3.2.0 --hash=sha256:fe454aeab348c42f56d6f7434ff758a3ef90787ac81b9ad5a363cd61b90a1b0b
yarl==1.8.2 --hash=sha256:64dd68a92cab699a233641f5929a40f02a4ede8c009068ca8aa1fe87b8c20ae3
aiohttp==3.8.4 --hash=sha256:6ddb2a2026c3f6a68c3998a6c47ab6795e4127315d2e35a09997da21865757f8
fsspec==2023.3.0 --hash=sha256:bf57215e19dbfa4fe7edae53040cc1deef825e3b1605cca9a8d2c2fadd2328a0
datasets==2.10.1 --hash=sha256:bfde7253b31abfd075f9ad55961b13c135a5a9295cea04ae86c47b9c0e0466fd
openai==0.27.0 --hash=sha256:7d4066ea529658a1f1696a8766912b3f3b7139faca860dc530bf102f0b19d42c
zstandard==0.20.0 --hash=sha256:4af5d1891eebef430038ea4981957d31b1eb70aca14b906660c3ac1c3e7a8612
lm-eval==0.3.0 --hash=sha256:a1b3cc6c3f1291717cac79a995dc2204547fe086ecfdec0e440ff1cea20b2ac2
ENVBUILD_EOF_23b1f6725a9d
  /root/.envbuild/envs/gpt-neox/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/gpt-neox/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:deepspeed: deepspeed @ eb7f5cff3667
# why: requirements/requirements.txt:1: pip install
# why: git+https://github.com/EleutherAI/DeeperSpeed@eb7f5cff36678625d23db8a8fe78b4a93e5d2c75; its
# why: dependencies: requirements/requirements.txt at eb7f5cff3667
step_git_deepspeed() {
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/git-deepspeed.json"
}

# step install:deepspeed: install deepspeed (wheel)
# why: non-editable install, as the published instructions require
step_install_deepspeed() {
  /root/.envbuild/envs/gpt-neox/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/gpt-neox/src/deepspeed
}

# step git:lm_dataformat: lm_dataformat @ 4eec05349977
# why: requirements/requirements.txt:4: pip install
# why: git+https://github.com/EleutherAI/lm_dataformat@4eec05349977071bf67fc072290b95e31c8dd836; its
# why: dependencies: setup.py install_requires
step_git_lm_dataformat() {
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/git-lm_dataformat.json"
}

# step install:lm_dataformat: install lm_dataformat (wheel)
# why: non-editable install, as the published instructions require
step_install_lm_dataformat() {
  /root/.envbuild/envs/gpt-neox/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/gpt-neox/src/lm_dataformat
}

# step git:apex: apex @ a651e2c24ecf
# why: Dockerfile:99: pip install
# why: git+https://github.com/NVIDIA/apex@a651e2c24ecf97cbf367fd3f330df36760e1c597; its dependencies:
# why: requirements.txt at a651e2c24ecf
step_git_apex() {
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex before pyproject.toml: build the wheel with `python setup.py bdist_wheel` in the tree
# why: (needs the wheel package and the installed torch), then pip install the wheel; pip 24.0 >= 23.1
# why: deprecated --global-option and dropped the setup.py install fallback; 1 extension(s) x 1 job(s)
# why: x 1 nvcc thread(s) = 1 concurrent nvcc at ~3 GiB each within 0 of 4 GiB, keeping 4 GiB headroom
# why: (1 cores, 1 GPU arch(s); NVIDIA/apex#1882); below the ~24 GiB peak measured for a default build:
# why: expect a slow build or OOM, or build the wheel on a bigger node and reuse it (cache_key)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 1 ? $(nproc) : 1 ))" /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-a651e2c24ecf-062474463f9bb050c08b.json"
  /root/.envbuild/envs/gpt-neox/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/gpt-neox/.envbuild/wheels/apex-a651e2c24ecf-062474463f9bb050c08b apex
}

# step git:neox-fused-kernels: neox-fused-kernels @ 71df4d5017f9
# why: README.md:51 and Dockerfile:102: python megatron/fused_kernels/setup.py install
step_git_neox_fused_kernels() {
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/git-neox-fused-kernels.json"
}

# step build:neox-fused-kernels: build neox-fused-kernels
# why: published build step for neox-fused-kernels
step_build_neox_fused_kernels() {
  (cd /root/.envbuild/envs/gpt-neox/src/neox-fused-kernels && env PATH=/root/.envbuild/envs/gpt-neox/bin:"$PATH" bash -ec 'python megatron/fused_kernels/setup.py install')
}

# step git:gpt-neox: gpt-neox @ 71df4d5017f9
# why: the drafted repository at v1.0; install none: no instruction installs the tree itself
step_git_gpt_neox() {
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/git-gpt-neox.json"
}

# step data:gpt-neox: 3 data file(s) for gpt-neox
# why: the published downloads, each checked against its sha256 and recorded on the node; without a
# why: digest in the recipe (gpt2-vocab, gpt2-merges, enron): the first fetch's digest is recorded and
# why: later fetches must match it
step_data_gpt_neox() {
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/data
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/tools && cp "$FILES/assets/node/fetch_data.py" /root/.envbuild/envs/gpt-neox/.envbuild/tools/fetch_data.py && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/tools/fetch_data.py
  /root/.envbuild/envs/gpt-neox/bin/python /root/.envbuild/envs/gpt-neox/.envbuild/tools/fetch_data.py --name gpt2-vocab --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-vocab.json --dest /root/.envbuild/envs/gpt-neox/src/gpt-neox/data/gpt2-vocab.json --record-dir /root/.envbuild/envs/gpt-neox/.envbuild/data --root /root/.envbuild/envs/gpt-neox/src/gpt-neox
  /root/.envbuild/envs/gpt-neox/bin/python /root/.envbuild/envs/gpt-neox/.envbuild/tools/fetch_data.py --name gpt2-merges --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-merges.txt --dest /root/.envbuild/envs/gpt-neox/src/gpt-neox/data/gpt2-merges.txt --record-dir /root/.envbuild/envs/gpt-neox/.envbuild/data --root /root/.envbuild/envs/gpt-neox/src/gpt-neox
  /root/.envbuild/envs/gpt-neox/bin/python /root/.envbuild/envs/gpt-neox/.envbuild/tools/fetch_data.py --name enron --url http://eaidata.bmk.sh/data/enron_emails.jsonl.zst --dest /root/.envbuild/envs/gpt-neox/src/gpt-neox/data/enron/enron_emails.jsonl.zst --record-dir /root/.envbuild/envs/gpt-neox/.envbuild/data --root /root/.envbuild/envs/gpt-neox/src/gpt-neox
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild && cat > /root/.envbuild/envs/gpt-neox/.envbuild/env.sh <<'ENVBUILD_EOF_f23456d2376c' && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/gpt-neox
export PATH=/root/.envbuild/envs/gpt-neox/bin:"$PATH"
ENVBUILD_EOF_f23456d2376c
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/gpt-neox/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/gpt-neox/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/gpt-neox/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/gpt-neox/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/gpt-neox/.envbuild/smoke/apex_check.py
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/gpt-neox/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight system-packages environment pip-tooling pip:torch pip:packages git:deepspeed install:deepspeed git:lm_dataformat install:lm_dataformat git:apex apex:apex git:neox-fused-kernels build:neox-fused-kernels git:gpt-neox data:gpt-neox env-file smoke)
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
