#!/usr/bin/env bash
# Provision gpt-neox-sm90 on h100-venv (host h100-venv, facts profile:h100-venv),
# rendered by envbuild 0.1.0 from the plan; lock digest 2bb49f87e4dcd51ff855a018eb59644dfb51ab1371ccef3d0b741fea56f50a0b.
# Regenerate: envbuild render gpt-neox-sm90 --target h100-venv --format shell
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
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/state
  rm -f /root/.envbuild/envs/gpt-neox-sm90/pyvenv.cfg /root/.envbuild/envs/gpt-neox-sm90/bin/python /root/.envbuild/envs/gpt-neox-sm90/bin/python3 /root/.envbuild/envs/gpt-neox-sm90/bin/python3.12
  /usr/bin/python3.12 -m venv --system-site-packages /root/.envbuild/envs/gpt-neox-sm90
  /root/.envbuild/envs/gpt-neox-sm90/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==24.0, wheel==0.45.1
# why: pip pinned to 24.0 so build-option syntax is known; deepspeed, lm_dataformat, apex built with
# why: --no-build-isolation: setuptools < 70.1 needs the wheel package (< 0.46) for bdist_wheel and
# why: editable installs; without it pip fails with "invalid command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements && cat > /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_93b40a7a3b9c' && chmod 0644 /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-tooling.txt
pip==24.0 --hash=sha256:ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_93b40a7a3b9c
  /root/.envbuild/envs/gpt-neox-sm90/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:packages: 64 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements && cat > /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_407d7de127da' && chmod 0644 /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-packages.txt
absl-py==2.5.1 --hash=sha256:721200f2f0e9960f2ca9dc3a2a706b201f5f75d812c158f059cbbe29eeafbdb8
annotated-types==0.8.0 --hash=sha256:f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0
attrs==26.1.0 --hash=sha256:c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309
chardet==6.0.0.post1 --hash=sha256:c894a36800549adf7bb5f2af47033281b75fdfcd2aa0f0243be0ad22a52e2dcb
charset-normalizer==3.5.3 --hash=sha256:e5e4785d8a0adeadfbdf75f4efc357911842674651cbafd7e97f69b11ec3cbc6
click==8.5.1 --hash=sha256:8bb5376d2006950386f8c6427613334a2acadc5f559cb80e638d00b4df957e37
colorama==0.4.6 --hash=sha256:4f1d9991f5acc0ca119f9d443620b77f9d6b33703e51011c16baf57afb285fc6
cxxfilt==0.3.0 --hash=sha256:774e85a8d0157775ed43276d89397d924b104135762d86b3a95f81f203094e07
defusedxml==0.7.1 --hash=sha256:a352e7e428770286cc899e2542b6cdaedb2b4953ff269a210103ec58f6198a61
dill==0.4.1 --hash=sha256:1e1ce33e978ae97fcfcff5638477032b801c46c7c65cf717f95fbc2248f79a9d
filelock==4.3.1 --hash=sha256:79e43df8e9fe509cd83a3899a7c186c8077cbbe4d200a1ed3705c2f3bb6bc487
h11==0.16.0 --hash=sha256:63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86
idna==3.20 --hash=sha256:ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c
iniconfig==2.3.1 --hash=sha256:9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7
jinxed==2.1.0 --hash=sha256:43b802d18b70e405d410fb66eb2837d1101e7e5ea922e666507bb43f34d11d09
jiter==0.19.0 --hash=sha256:0956b5f58b804221dfb929c120e6d4032138fed20c1cc0ef683a2d1326255e46
jsonlines==4.0.0 --hash=sha256:185b334ff2ca5a91362993f42e83588a360cf95ce4b71a73548502bda52a7c55
mbstrdecoder==1.1.5 --hash=sha256:4a50fe113d4abecfd86e8f716b2e413cce03d63af83ec3c7cdbe81dec0e519ed
multiprocess==0.70.19 --hash=sha256:97404393419dcb2a8385910864eedf47a3cadf82c66345b44f036420eb0b5d87
nltk==3.10.4 --hash=sha256:769ba5413f265b7d3e87cd163cc28efa01e29eeef8bb6080bc907949d9fcfb51
numexpr==2.14.2 --hash=sha256:d6a5d8fc7016bf6f6e1808b011510aa7c3bd75ec1407f7650874ec591db59f5e
nvidia-ml-py==13.615.71 --hash=sha256:959bf4adf6fe1308e4bd739e722236b0d1ec8392e2cefad33ff70c311380b9b6
packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
datasets==5.2.0 --hash=sha256:4be9e2882caaf5db13eadc39e93f3da2a995187b99acebac1595bf6c58dfa927
pathvalidate==3.3.1 --hash=sha256:5263baab691f8e1af96092fa5137ee17df5bdfbd6cff1fcac4d6ef4bc2e1735f
pluggy==1.7.0 --hash=sha256:7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec
portalocker==4.4.2 --hash=sha256:e661b91af34fc1806740f8e0e42990fe55cd85cbae55675ac48a400a9656a51b
pycountry==26.2.16 --hash=sha256:115c4baf7cceaa30f59a4694d79483c9167dbce7a9de4d3d571c5f3ea77c305a
pygments==2.21.0 --hash=sha256:2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9
pytest==9.2.0 --hash=sha256:07acdcf88ec174f907dc01af70bf52d49b014bbab03faeeade31c96b18c2e588
python-dateutil==2.9.0.post0 --hash=sha256:a8b2bc7bffae282281c8140a97d3aa9c14da0b136dfe83f850eea9a5f7470427
pytz==2026.6 --hash=sha256:7fed3fee8fd6bd4a2b7b75a8d56021d0624127bf69bd5691f115db929ac570b3
rouge-score==0.1.2 --hash=sha256:c7d4da2683e68c9abf0135ef915d63a46643666f848e558a1b9f7ead17ff0f04
sacrebleu==1.5.0 --hash=sha256:7c978b7fc47f26592f8c3213bf1fd66044c57e36c22449f3ad04b983d35b6527
setuptools==84.2.1 --hash=sha256:ca140b45d5325a9478f880e351484f62fef15f336462e449ca0c03c873d589c2
shortuuid==1.0.13 --hash=sha256:a482a497300b49b4953e15108a7913244e1bb0d41f9d332f5e9925dba33a3c5a
sniffio==1.3.1 --hash=sha256:2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2
sqlitedict==2.1.0 --hash=sha256:03d9cfb96d602996f1d4c2db2856f1224b96a9c431bdd16e78032a72940f9e8c
tcolorpy==0.1.7 --hash=sha256:26a59d52027e175a37e0aba72efc99dda43f074db71f55b316d3de37d3251378
tensorboardx==2.6.5 --hash=sha256:c10b891d00af306537cb8b58a039b2ba41571f0da06f433a41c4ca8d6abe1373
tqdm-multiprocess==0.0.11 --hash=sha256:3ebdf03e7a675150fa0bbceaa9c3c64b8cb556e9ffafa4fe6c078e51820524aa
truststore==0.10.5 --hash=sha256:9aaaedaefaf06d8b206278cf8b5012bc897f485a874503501e12d776df78951c
httpcore2==2.16.2 --hash=sha256:16051ae2a42f776007543f32de9349a317b23d2cbb4e1456b4bac0e88b87419a
typepy==1.3.5 --hash=sha256:de361b59609c7503efc2edbe9d7a4e053ae71307bf90ae1678ec4d6bcd807922
dataproperty==1.1.1 --hash=sha256:cf026aa002dbd6c57c619ec6741ffd61ae7bf2f20481951d8af2dff44480340e
tabledata==1.3.5 --hash=sha256:a1e57afc4767b51bef551114c0df31f205d712dbb75e3caf9be7834a79f23136
pytablewriter==1.2.1 --hash=sha256:e906ff7ff5151d70a5f66e0f7b75642a7f2dce8d893c265b79cc9cf6bc04ddb4
typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
anyio==4.16.0 --hash=sha256:c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026
httpx2==2.16.2 --hash=sha256:f05c13aade4c45dbf1c9060647a1058f0acad62398fad96e741269edb33d46f5
pydantic-core==2.50.5 --hash=sha256:470bbc2495367f60d3ca849a8039e4c164701d10637e7743f4427d92651bdb6d
typing-inspection==0.4.5 --hash=sha256:bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39
pydantic==2.14.4 --hash=sha256:653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc
openai==3.57.0 --hash=sha256:f97bc74024c06ced8428b56c4a3594066709d3082779bf9d0b4b6092fbf587a8
ujson==6.1.0 --hash=sha256:bc8678ee265df15562b382d6a446bc0e5712f41b08e5ff59fd4ae9e28c7ed4e0
urllib3==2.8.0 --hash=sha256:0cf3cae568d36aa9576b28dfb35f11328f1cb974ca7647d9475ebb86c75ac6e3
requests==2.34.2 --hash=sha256:2a0d60c172f83ac6ab31e4554906c0f3b3588d37b5cb939b1c061f4907e278e0
best-download==0.1.2 --hash=sha256:25f25c14bb356a8dd3455fa3778c56cf2af3b515f2e2b841ebfdcaf42412d9ff
wcwidth==0.9.4 --hash=sha256:b185c8b927b23af2721be1783499d1cfa5c028b098b0858951b4ae224477f1c2
blessed==1.52.0 --hash=sha256:1936f421f3feb130035a4629e6477d1432e33b2674ab2b9841292c74d479eac2
ftfy==6.0.1 --hash=sha256:9eb68533eb2a6124e96ed7f63049e6c519194fda3fae92629b5e0b5753cb2c8f
gpustat==1.1.1 --hash=sha256:c18d3ed5518fc16300c42d694debc70aebb3be55cae91f1db64d63b5fa8af9d8
zstandard==0.25.0 --hash=sha256:5a56ba0db2d244117ed744dfa8f6f5b366e14148e00de44723413b2f3938a902
lm-eval==0.3.0 --hash=sha256:a1b3cc6c3f1291717cac79a995dc2204547fe086ecfdec0e440ff1cea20b2ac2
ENVBUILD_EOF_407d7de127da
  /root/.envbuild/envs/gpt-neox-sm90/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:deepspeed: deepspeed @ eb7f5cff3667
# why: requirements/requirements.txt:1: pip install
# why: git+https://github.com/EleutherAI/DeeperSpeed@eb7f5cff36678625d23db8a8fe78b4a93e5d2c75; its
# why: dependencies: requirements/requirements.txt at eb7f5cff3667
step_git_deepspeed() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/git-deepspeed.json"
}

# step patch:torch-six-inf-utils: patch torch-six-inf-utils
# why: `from torch._six import inf` raises ModuleNotFoundError: torch 2.0 removed torch._six (torch.inf
# why: is the same float('inf')) (envbuild port, fix torch-six-inf: 1 at deepspeed/runtime/utils.py:18
# why: at eb7f5cff3667)
step_patch_torch_six_inf_utils() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-torch-six-inf-utils.json"
}

# step patch:torch-six-inf-stage2: patch torch-six-inf-stage2
# why: `from torch._six import inf` raises ModuleNotFoundError: torch 2.0 removed torch._six (torch.inf
# why: is the same float('inf')) (envbuild port, fix torch-six-inf: 1 at
# why: deepspeed/runtime/zero/stage2.py:9 at eb7f5cff3667)
step_patch_torch_six_inf_stage2() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-torch-six-inf-stage2.json"
}

# step patch:torch-six-inf-stage3: patch torch-six-inf-stage3
# why: `from torch._six import inf` raises ModuleNotFoundError: torch 2.0 removed torch._six (torch.inf
# why: is the same float('inf')) (envbuild port, fix torch-six-inf: 1 at
# why: deepspeed/runtime/zero/stage3.py:14 at eb7f5cff3667)
step_patch_torch_six_inf_stage3() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-torch-six-inf-stage3.json"
}

# step patch:collections-abc-attr-config-utils: patch collections-abc-attr-config-utils
# why: collections.Mapping (any ABC) raises AttributeError: Python 3.10 removed the aliases of
# why: collections.abc from collections (envbuild port, fix collections-abc-attr: 1 at
# why: deepspeed/runtime/config_utils.py:34 at eb7f5cff3667)
step_patch_collections_abc_attr_config_utils() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-collections-abc-attr-config-utils.json"
}

# step patch:collections-abc-attr-config-utils-2: patch collections-abc-attr-config-utils-2
# why: collections.Mapping (any ABC) raises AttributeError: Python 3.10 removed the aliases of
# why: collections.abc from collections (envbuild port, fix collections-abc-attr: 1 at
# why: deepspeed/runtime/config_utils.py:40 at eb7f5cff3667)
step_patch_collections_abc_attr_config_utils_2() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-collections-abc-attr-config-utils-2.json"
}

# step install:deepspeed: install deepspeed (wheel)
# why: non-editable install, as the published instructions require
step_install_deepspeed() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/gpt-neox-sm90/src/deepspeed
}

# step git:lm_dataformat: lm_dataformat @ 4eec05349977
# why: requirements/requirements.txt:4: pip install
# why: git+https://github.com/EleutherAI/lm_dataformat@4eec05349977071bf67fc072290b95e31c8dd836; its
# why: dependencies: setup.py install_requires
step_git_lm_dataformat() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/git-lm_dataformat.json"
}

# step install:lm_dataformat: install lm_dataformat (wheel)
# why: non-editable install, as the published instructions require
step_install_lm_dataformat() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /root/.envbuild/envs/gpt-neox-sm90/src/lm_dataformat
}

# step git:apex: apex @ 6424da3b4faa
# why: Dockerfile:99: pip install
# why: git+https://github.com/NVIDIA/apex@a651e2c24ecf97cbf367fd3f330df36760e1c597; its dependencies:
# why: requirements.txt at a651e2c24ecf Moved by envbuild port to 6424da3b (2026-07-08): the first
# why: known commit after a651e2c2 that no Apex row refuses on torch 2.11.0+cu130, Python 3.12.
step_git_apex() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex 2026-07-08 reads APEX_* env vars (since 2025-07-22, bfb500c8); pyproject.toml -> --no-
# why: build-isolation so the build sees the installed torch; 4 extension(s) x 4 job(s) x 1 nvcc
# why: thread(s) = 16 concurrent nvcc at ~3 GiB each within 109 of 128 GiB, keeping 19 GiB headroom (16
# why: cores, 1 GPU arch(s); NVIDIA/apex#1882)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 4 ? $(nproc) : 4 ))" /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-6424da3b4faa-837967d631b5195728b8.json"
  /root/.envbuild/envs/gpt-neox-sm90/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/root/.envbuild/envs/gpt-neox-sm90/.envbuild/wheels/apex-6424da3b4faa-837967d631b5195728b8 apex
}

# step git:neox-fused-kernels: neox-fused-kernels @ 71df4d5017f9
# why: README.md:51 and Dockerfile:102: python megatron/fused_kernels/setup.py install
step_git_neox_fused_kernels() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/git-neox-fused-kernels.json"
}

# step patch:collections-abc-attr-optimizers-2: patch collections-abc-attr-optimizers-2
# why: collections.Mapping (any ABC) raises AttributeError: Python 3.10 removed the aliases of
# why: collections.abc from collections (envbuild port, fix collections-abc-attr: 1 at
# why: megatron/optimizers.py:309 at 71df4d5017f9)
step_patch_collections_abc_attr_optimizers_2() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-collections-abc-attr-optimizers-2.json"
}

# step patch:gencode-sm70-setup-2: patch gencode-sm70-setup-2
# why: a hard-coded -gencode arch=compute_70,code=sm_70 (fused kernels JIT-built at start-up, extension
# why: builds): nvcc 13 cannot target sm_70, and no sm_70/sm_80 cubin runs on a newer major; the node's
# why: own arch takes its place (envbuild port, fix gencode-sm70: 1 at
# why: megatron/fused_kernels/setup.py:31 at 71df4d5017f9)
step_patch_gencode_sm70_setup_2() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-gencode-sm70-setup-2.json"
}

# step build:neox-fused-kernels: build neox-fused-kernels
# why: published build step for neox-fused-kernels
step_build_neox_fused_kernels() {
  (cd /root/.envbuild/envs/gpt-neox-sm90/src/neox-fused-kernels && env PATH=/root/.envbuild/envs/gpt-neox-sm90/bin:"$PATH" bash -ec 'if python -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then python megatron/fused_kernels/setup.py install; else echo "no GPU here: the fused kernels are not built (configs/125M.yml does not load them)"; fi')
}

# step git:gpt-neox: gpt-neox @ 71df4d5017f9
# why: the drafted repository at v1.0; install none: no instruction installs the tree itself
step_git_gpt_neox() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/git-gpt-neox.json"
}

# step patch:collections-abc-attr-optimizers: patch collections-abc-attr-optimizers
# why: collections.Mapping (any ABC) raises AttributeError: Python 3.10 removed the aliases of
# why: collections.abc from collections (envbuild port, fix collections-abc-attr: 1 at
# why: megatron/optimizers.py:309 at 71df4d5017f9)
step_patch_collections_abc_attr_optimizers() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-collections-abc-attr-optimizers.json"
}

# step patch:gencode-sm70-setup: patch gencode-sm70-setup
# why: a hard-coded -gencode arch=compute_70,code=sm_70 (fused kernels JIT-built at start-up, extension
# why: builds): nvcc 13 cannot target sm_70, and no sm_70/sm_80 cubin runs on a newer major; the node's
# why: own arch takes its place (envbuild port, fix gencode-sm70: 1 at
# why: megatron/fused_kernels/setup.py:31 at 71df4d5017f9)
step_patch_gencode_sm70_setup() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-gencode-sm70-setup.json"
}

# step patch:wandb-optional-utils: patch wandb-optional-utils
# why: megatron/utils.py:27-28 imports wandb at module level; init_wandb calls it only when use_wandb
# why: is set
step_patch_wandb_optional_utils() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-wandb-optional-utils.json"
}

# step patch:wandb-optional-logging: patch wandb-optional-logging
# why: megatron/logging.py:17 imports wandb at module level; tb_wandb_log calls it only when use_wandb
# why: is set
step_patch_wandb_optional_logging() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-wandb-optional-logging.json"
}

# step build:gpt-neox: build gpt-neox
# why: published build step for gpt-neox
step_build_gpt_neox() {
  (cd /root/.envbuild/envs/gpt-neox-sm90/src/gpt-neox && env PATH=/root/.envbuild/envs/gpt-neox-sm90/bin:"$PATH" bash -ec 'python3 -c "import subprocess, sysconfig; subprocess.check_call(['"'"'make'"'"', '"'"'-C'"'"', '"'"'megatron/data'"'"', '"'"'LIBEXT='"'"' + sysconfig.get_config_var('"'"'EXT_SUFFIX'"'"')])"')
}

# step git:gpt2-vocab: gpt2-vocab @ f4157bea69f3
# why: The GPT-2 BPE vocabulary and merges configs/local_setup.yml names (tools/corpora.py:31-32
# why: fetches them from S3), pinned so that they travel in the bundle (deviation enron-and-s3-vocab-
# why: unreachable): microsoft/Megatron-DeepSpeed f4157bea commits them as
# why: examples_deepspeed/rebase/gpt2-vocab.json and gpt2-merges.txt, as megatron-deepspeed-slurm-h100
# why: uses them. Clone only; nothing of it is imported.
step_git_gpt2_vocab() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/git-gpt2-vocab.json"
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild && cat > /root/.envbuild/envs/gpt-neox-sm90/.envbuild/env.sh <<'ENVBUILD_EOF_195f459f8e1a' && chmod 0644 /root/.envbuild/envs/gpt-neox-sm90/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/gpt-neox-sm90
export PATH=/root/.envbuild/envs/gpt-neox-sm90/bin:"$PATH"
ENVBUILD_EOF_195f459f8e1a
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke/collective.py
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke/apex_check.py && chmod 0644 /root/.envbuild/envs/gpt-neox-sm90/.envbuild/smoke/apex_check.py
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-native.json" || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:packages git:deepspeed patch:torch-six-inf-utils patch:torch-six-inf-stage2 patch:torch-six-inf-stage3 patch:collections-abc-attr-config-utils patch:collections-abc-attr-config-utils-2 install:deepspeed git:lm_dataformat install:lm_dataformat git:apex apex:apex git:neox-fused-kernels patch:collections-abc-attr-optimizers-2 patch:gencode-sm70-setup-2 build:neox-fused-kernels git:gpt-neox patch:collections-abc-attr-optimizers patch:gencode-sm70-setup patch:wandb-optional-utils patch:wandb-optional-logging build:gpt-neox git:gpt2-vocab env-file smoke)
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
