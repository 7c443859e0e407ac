#!/usr/bin/env bash
# Provision megatron-deepspeed-slurm on slurm (host slurm, facts profile:slurm),
# rendered by envbuild 0.1.0 from the plan; lock digest faf4dd6d290bcccbddeae7d9d97ac4e1b9f551be99e95933cd607ccb3189d014.
# Regenerate: envbuild render megatron-deepspeed-slurm --target slurm --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  :  # nothing to do on this node
}

# step environment: container environment, Python 3.8
# why: recipe asks for Python 3.8; inside the image nvcr.io/nvidia/pytorch:22.02-py3: a venv with
# why: --system-site-packages over the image's python3 keeps its preinstalled packages and takes the
# why: plan's
step_environment() {
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/state
  rm -f /root/.envbuild/envs/megatron-deepspeed-slurm/pyvenv.cfg /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python3 /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python3.8
  python3 -m venv --system-site-packages /root/.envbuild/envs/megatron-deepspeed-slurm
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip:packages: 15 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/requirements && cat > /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_a3c461785680' && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/requirements/pip-packages.txt
click==8.1.3 --hash=sha256:bb4d8133cb15a609f44e8213d9b391b0809795062913b383c62be0ee95b1db48
hjson==3.0.2 --hash=sha256:5546438bf4e1b52bc964c6a47c4ed10fa5fba8a1b264e22efa893e333baad2db
joblib==1.1.0 --hash=sha256:f21f109b3c7ff9d95f8387f752d0d9c34a02aa2f7060c2135f465da0e5160ff6
ninja==1.10.2.3 --hash=sha256:279836285975e3519392c93c26e75755e8a8a7fafec9f4ecbb0293119ee0f9c6
psutil==5.9.0 --hash=sha256:1070a9b287846a21a5d572d6dddd369517510b68710fca56b0e9e02fd24bed9a
py-cpuinfo==8.0.0 --hash=sha256:5f269be0e08e33fd959de96b34cd4aeeeacac014dd8305f70eb28d06de2345c5
pybind11==2.9.2 --hash=sha256:20f56674da31c96bca7569b91e60f2bd30d693f0728541412ec927574f7bc9df
pyparsing==3.0.8 --hash=sha256:ef7b523f6356f763771559412c0d7134753f037822dad1b16945b7b846f7ad06
packaging==21.3 --hash=sha256:ef103e05f519cdc783ae24ea4e2e0f508a9c99b2d4969652eed6a2e1ea5bd522
regex==2022.4.24 --hash=sha256:b7ba3c304a4a5d8112dbd30df8b3e4ef59b4b07807957d3c410d9713abaee9a8
setuptools==62.1.0 --hash=sha256:26ead7d1f93efc0f8c804d9fafafbe4a44b179580a7105754b245155f9af05a8
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
tqdm==4.64.0 --hash=sha256:74a2cdefe14d11442cedf3ba4e21a3b84ff9a2dbdc6cfae2c34addb2a14a5ea6
deepspeed==0.6.3 --hash=sha256:eb5ed5a12ad8a1388ad15358204f05d833ade1e9af0530e6e6aa613bead67a49
nltk==3.7 --hash=sha256:ba3de02490308b248f9b94c8bc1ac0683e9aa2ec49ee78536d8667afb5e3eec8
ENVBUILD_EOF_a3c461785680
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:slurm-scripts: slurm-scripts @ 1b53975055fa
# why: The published batch scripts megatron_ds_snmg.slurm / megatron_ds_mnmg.slurm (the repository's
# why: whole history is two commits of 2022-05-04).
step_git_slurm_scripts() {
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python "$FILES/envbuild_node" "$FILES/actions/git-slurm-scripts.json"
}

# step git:megatron-deepspeed: megatron-deepspeed @ 87476ced4362
# why: The README clones main unpinned. 87476ced (2022-04-25, "Fix typo (#41)") is the first-parent
# why: main commit contemporary with the scripts: it has every argument they use (--checkpoint-
# why: activations, --loss-scale, --deepspeed-activation-checkpointing, --zero-stage) and a
# why: preprocess_data.py with only --vocab-file, so the README's abbreviated --vocab works. The
# why: README's downloads are the recipe's data (fetched and sha256-checked into the tree by the data
# why: step); the build step is its preprocessing, producing my-gpt2_text_document.{bin,idx} next to
# why: the vocab and merges files, where the batch scripts expect them (their working directory).
step_git_megatron_deepspeed() {
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatron-deepspeed.json"
}

# step data:megatron-deepspeed: 3 data file(s) for megatron-deepspeed
# why: the published downloads, each checked against its sha256 and recorded on the node; without a
# why: digest in the recipe (oscar-1gb, gpt2-vocab, gpt2-merges): the first fetch's digest is recorded
# why: and later fetches must match it
step_data_megatron_deepspeed() {
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/data
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/tools && cp "$FILES/assets/node/fetch_data.py" /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py --name oscar-1gb --url https://huggingface.co/bigscience/misc-test-data/resolve/main/stas/oscar-1GB.jsonl.xz --dest /root/.envbuild/envs/megatron-deepspeed-slurm/src/megatron-deepspeed/oscar-1GB.jsonl.xz --record-dir /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/data --decompress xz --root /root/.envbuild/envs/megatron-deepspeed-slurm/src/megatron-deepspeed
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py --name gpt2-vocab --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-vocab.json --dest /root/.envbuild/envs/megatron-deepspeed-slurm/src/megatron-deepspeed/gpt2-vocab.json --record-dir /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/data --root /root/.envbuild/envs/megatron-deepspeed-slurm/src/megatron-deepspeed
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py --name gpt2-merges --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-merges.txt --dest /root/.envbuild/envs/megatron-deepspeed-slurm/src/megatron-deepspeed/gpt2-merges.txt --record-dir /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/data --root /root/.envbuild/envs/megatron-deepspeed-slurm/src/megatron-deepspeed
}

# step build:megatron-deepspeed: build megatron-deepspeed
# why: published build step for megatron-deepspeed
step_build_megatron_deepspeed() {
  (cd /root/.envbuild/envs/megatron-deepspeed-slurm/src/megatron-deepspeed && env PATH=/root/.envbuild/envs/megatron-deepspeed-slurm/bin:"$PATH" bash -ec 'python tools/preprocess_data.py --input oscar-1GB.jsonl --output-prefix my-gpt2 --vocab gpt2-vocab.json --dataset-impl mmap --tokenizer-type GPT2BPETokenizer --merge-file gpt2-merges.txt --append-eod --workers 8')
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild && cat > /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/env.sh <<'ENVBUILD_EOF_92b3f2531836' && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/megatron-deepspeed-slurm
export PATH=/root/.envbuild/envs/megatron-deepspeed-slurm/bin:"$PATH"
ENVBUILD_EOF_92b3f2531836
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch deepspeed apex megatron
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/megatron-deepspeed-slurm/.envbuild/smoke/collective.py
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /root/.envbuild/envs/megatron-deepspeed-slurm/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-native.json" || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip:packages git:slurm-scripts git:megatron-deepspeed data:megatron-deepspeed build:megatron-deepspeed env-file import-check smoke)
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
