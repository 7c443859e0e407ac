#!/usr/bin/env bash
# Provision gpt-neox-sm90 on h100-venv (host h100-venv, facts profile:h100-venv),
# rendered by envbuild 0.1.0 from the plan; lock digest 7e4e3b579ad6622e686723a4e454941795c02d05854fdbd401135fd8cdb17c26.
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

# step pip:packages: 59 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements && cat > /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_ca01adf963ff' && chmod 0644 /root/.envbuild/envs/gpt-neox-sm90/.envbuild/requirements/pip-packages.txt
absl-py==2.4.0 --hash=sha256:88476fd881ca8aab94ffa78b7b6c632a782ab3ba1cd19c9bd423abc4fb4cd28d
annotated-types==0.7.0 --hash=sha256:1f02e8b43a8fbbc3f3e0d4f0f4bfc8131bcb4eebe8849b8e5c773f3a1c582a53
attrs==26.1.0 --hash=sha256:c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309
chardet==5.2.0 --hash=sha256:e1cf59446890a00105fe7b7912492ea04b6e6f06d4b742b2c788469e34c82970
charset-normalizer==3.4.7 --hash=sha256:5649fd1c7bade02f320a462fdefd0b4bd3ce036065836d4f42e0de958038e116
click==8.3.3 --hash=sha256:a2bf429bb3033c89fa4936ffb35d5cb471e3719e1f3c8a7c3fff0b8314305613
colorama==0.4.6 --hash=sha256:4f1d9991f5acc0ca119f9d443620b77f9d6b33703e51011c16baf57afb285fc6
cxxfilt==0.3.0 --hash=sha256:774e85a8d0157775ed43276d89397d924b104135762d86b3a95f81f203094e07
dill==0.4.1 --hash=sha256:1e1ce33e978ae97fcfcff5638477032b801c46c7c65cf717f95fbc2248f79a9d
distro==1.9.0 --hash=sha256:7bffd925d65168f85027d8da9af6bddab658135b840670a223589bc0c8ef02b2
filelock==3.29.0 --hash=sha256:96f5f6344709aa1572bbf631c640e4ebeeb519e08da902c39a001882f30ac258
h11==0.16.0 --hash=sha256:63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86
httpcore==1.0.9 --hash=sha256:2d400746a40668fc9dec9810239072b40b4484b640a8c38fd654a024c7a1bf55
idna==3.13 --hash=sha256:892ea0cde124a99ce773decba204c5552b69c3c67ffd5f232eb7696135bc8bb3
iniconfig==2.3.0 --hash=sha256:f631c04d2c48c52b84d0d0549c99ff3859c98df65b3101406327ecc7d53fbf12
jiter==0.14.0 --hash=sha256:c1dcfbeb93d9ecd9ca128bbf8910120367777973fa193fb9a39c31237d8df165
jsonlines==4.0.0 --hash=sha256:185b334ff2ca5a91362993f42e83588a360cf95ce4b71a73548502bda52a7c55
mbstrdecoder==1.1.4 --hash=sha256:03dae4ec50ec0d2ff4743e63fdbd5e0022815857494d35224b60775d3d934a8c
multiprocess==0.70.19 --hash=sha256:97404393419dcb2a8385910864eedf47a3cadf82c66345b44f036420eb0b5d87
nltk==3.9.4 --hash=sha256:f2fa301c3a12718ce4a0e9305c5675299da5ad9e26068218b69d692fda84828f
numexpr==2.14.1 --hash=sha256:eee6d4fbbbc368e6cdd0772734d6249128d957b3b8ad47a100789009f4de7083
packaging==26.2 --hash=sha256:5fc45236b9446107ff2415ce77c807cee2862cb6fac22b8a73826d0693b0980e
pathvalidate==3.3.1 --hash=sha256:5263baab691f8e1af96092fa5137ee17df5bdfbd6cff1fcac4d6ef4bc2e1735f
pluggy==1.6.0 --hash=sha256:e920276dd6813095e9377c0bc5566d94c932c33b27a3e3945d8389c374dd4746
portalocker==3.2.0 --hash=sha256:3cdc5f565312224bc570c49337bd21428bba0ef363bbcf58b9ef4a9f11779968
pycountry==26.2.16 --hash=sha256:115c4baf7cceaa30f59a4694d79483c9167dbce7a9de4d3d571c5f3ea77c305a
pygments==2.20.0 --hash=sha256:81a9e26dd42fd28a23a2d169d86d7ac03b46e2f8b59ed4698fb4785f946d0176
pytest==9.0.3 --hash=sha256:2c5efc453d45394fdd706ade797c0a81091eccd1d6e4bccfcd476e2b8e0ab5d9
python-dateutil==2.9.0.post0 --hash=sha256:a8b2bc7bffae282281c8140a97d3aa9c14da0b136dfe83f850eea9a5f7470427
pytz==2026.1.post1 --hash=sha256:f2fd16142fda348286a75e1a524be810bb05d444e5a081f37f7affc635035f7a
rouge-score==0.1.2 --hash=sha256:c7d4da2683e68c9abf0135ef915d63a46643666f848e558a1b9f7ead17ff0f04
sacrebleu==1.5.0 --hash=sha256:7c978b7fc47f26592f8c3213bf1fd66044c57e36c22449f3ad04b983d35b6527
setuptools==82.0.1 --hash=sha256:a59e362652f08dcd477c78bb6e7bd9d80a7995bc73ce773050228a348ce2e5bb
shortuuid==1.0.13 --hash=sha256:a482a497300b49b4953e15108a7913244e1bb0d41f9d332f5e9925dba33a3c5a
sniffio==1.3.1 --hash=sha256:2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2
sqlitedict==2.1.0 --hash=sha256:03d9cfb96d602996f1d4c2db2856f1224b96a9c431bdd16e78032a72940f9e8c
tcolorpy==0.1.7 --hash=sha256:26a59d52027e175a37e0aba72efc99dda43f074db71f55b316d3de37d3251378
tensorboardx==2.6.5 --hash=sha256:c10b891d00af306537cb8b58a039b2ba41571f0da06f433a41c4ca8d6abe1373
tqdm-multiprocess==0.0.11 --hash=sha256:3ebdf03e7a675150fa0bbceaa9c3c64b8cb556e9ffafa4fe6c078e51820524aa
typepy==1.3.4 --hash=sha256:d5ed3e0c7f49521bff0603dd08cf8d453371cf68d65a29d3d0038552ccc46e2e
dataproperty==1.1.0 --hash=sha256:c61fcb2e2deca35e6d1eb1f251a7f22f0dcde63e80e61f0cc18c19f42abfd25b
tabledata==1.3.4 --hash=sha256:1f56e433bfdeb89f4487abfa48c4603a3b07c5d3a3c7e05ff73dd018c24bd0d4
pytablewriter==1.2.1 --hash=sha256:e906ff7ff5151d70a5f66e0f7b75642a7f2dce8d893c265b79cc9cf6bc04ddb4
typing-extensions==4.15.0 --hash=sha256:f0fa19c6845758ab08074a0cfa8b7aecb71c999ca73d62883bc25cc018c4e548
anyio==4.13.0 --hash=sha256:08b310f9e24a9594186fd75b4f73f4a4152069e3853f1ed8bfbf58369f4ad708
httpx==0.28.1 --hash=sha256:d909fcccc110f8c7faf814ca82a9a4d816bc5a6dbfea25d6591d6985b8ba59ad
pydantic-core==2.46.3 --hash=sha256:fb528e295ed31570ac3dcc9bfdd6e0150bc11ce6168ac87a8082055cf1a67395
typing-inspection==0.4.2 --hash=sha256:4ed1cacbdc298c220f1bd249ed5287caa16f34d44ef4e9c3d0cbad5b521545e7
pydantic==2.13.3 --hash=sha256:6db14ac8dfc9a1e57f87ea2c0de670c251240f43cb0c30a5130e9720dc612927
openai==2.33.0 --hash=sha256:03ac37d70e8c9e3a8124214e3afa785e2cbc12e627fbd98177a086ef2fd87ad5
ujson==5.12.0 --hash=sha256:085b6ce182cdd6657481c7c4003a417e0655c4f6e58b76f26ee18f0ae21db827
urllib3==2.6.3 --hash=sha256:bf272323e553dfb2e87d9bfd225ca7b0f467b919d7bbd355436d3fd37cb0acd4
requests==2.33.1 --hash=sha256:4e6d1ef462f3626a1f0a0a9c42dd93c63bad33f9f1c1937509b8c5c8718ab56a
best-download==0.1.2 --hash=sha256:25f25c14bb356a8dd3455fa3778c56cf2af3b515f2e2b841ebfdcaf42412d9ff
datasets==4.8.5 --hash=sha256:5079900781719c0e063a8efdd2cd95a31ad0c63209178669cd23cf1b926149ff
wcwidth==0.6.0 --hash=sha256:1a3a1e510b553315f8e146c54764f4fb6264ffad731b3d78088cdb1478ffbdad
ftfy==6.0.1 --hash=sha256:9eb68533eb2a6124e96ed7f63049e6c519194fda3fae92629b5e0b5753cb2c8f
zstandard==0.25.0 --hash=sha256:5a56ba0db2d244117ed744dfa8f6f5b366e14148e00de44723413b2f3938a902
lm-eval==0.3.0 --hash=sha256:a1b3cc6c3f1291717cac79a995dc2204547fe086ecfdec0e440ff1cea20b2ac2
ENVBUILD_EOF_ca01adf963ff
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

# step patch:wandb-optional-arguments: patch wandb-optional-arguments
# why: megatron/neox_arguments/arguments.py:352 imports wandb whenever wandb_group is set, and
# why: calculate_derived (:658) always sets it, so deepy.py stops before training without wandb
# why: (ModuleNotFoundError on a lent H200, run 13); the group name gets the same 8-character suffix
# why: without it
step_patch_wandb_optional_arguments() {
  /root/.envbuild/envs/gpt-neox-sm90/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-wandb-optional-arguments.json"
}

# step build:gpt-neox: build gpt-neox
# why: published build step for gpt-neox
step_build_gpt_neox() {
  (cd /root/.envbuild/envs/gpt-neox-sm90/src/gpt-neox && env PATH=/root/.envbuild/envs/gpt-neox-sm90/bin:"$PATH" bash -ec 'python3 -c "import subprocess, sysconfig; subprocess.check_call(['"'"'make'"'"', '"'"'-C'"'"', '"'"'megatron/data'"'"', '"'"'LIBEXT='"'"' + sysconfig.get_config_var('"'"'EXT_SUFFIX'"'"'), '"'"'CXX=g++'"'"'])"')
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

STEPS=(preflight environment pip-tooling pip:packages git:deepspeed patch:torch-six-inf-utils patch:torch-six-inf-stage2 patch:torch-six-inf-stage3 patch:collections-abc-attr-config-utils patch:collections-abc-attr-config-utils-2 install:deepspeed git:lm_dataformat install:lm_dataformat git:apex apex:apex git:neox-fused-kernels patch:collections-abc-attr-optimizers-2 patch:gencode-sm70-setup-2 build:neox-fused-kernels git:gpt-neox patch:collections-abc-attr-optimizers patch:gencode-sm70-setup patch:wandb-optional-utils patch:wandb-optional-logging patch:wandb-optional-arguments build:gpt-neox git:gpt2-vocab env-file smoke)
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
