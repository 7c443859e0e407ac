#!/usr/bin/env bash
# Provision cpu-reference on local (host local, facts profile:local),
# rendered by envbuild 0.1.0 from the plan; lock digest 457a334bc6b6f079d82f156a99e719cee4d9976c990345029f53678777092fc3.
# Regenerate: envbuild render cpu-reference --target local --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  :  # nothing to do on this node
}

# step environment: venv environment, Python 3.11
# why: recipe asks for Python 3.11
step_environment() {
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/state
  rm -f /root/.envbuild/envs/cpu-reference/pyvenv.cfg /root/.envbuild/envs/cpu-reference/bin/python /root/.envbuild/envs/cpu-reference/bin/python3 /root/.envbuild/envs/cpu-reference/bin/python3.11
  /usr/bin/python3.11 -m venv /root/.envbuild/envs/cpu-reference
  /root/.envbuild/envs/cpu-reference/bin/python -c "import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); [print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]"
}

# step pip-tooling: pip==24.0
# why: recipe pins pip 24.0
step_pip_tooling() {
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/requirements && cat > /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_580fda509eac' && chmod 0644 /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-tooling.txt
pip==24.0 --hash=sha256:ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc
ENVBUILD_EOF_580fda509eac
  /root/.envbuild/envs/cpu-reference/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:torch-deps: 9 packages torch needs
# why: torch's locked dependencies (none of them named by the recipe): installed apart so that they
# why: change only with torch
step_pip_torch_deps() {
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/requirements && cat > /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-torch-deps.txt <<'ENVBUILD_EOF_a3dc445dc5be' && chmod 0644 /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-torch-deps.txt
filelock==4.2.11 --hash=sha256:020e229e4bb9d410fc799c07ddf45fa217cba970278f40b30751d94f309b69e2
fsspec==2026.9.0 --hash=sha256:8dd6e646e99ea382bd85f97a45e6b526a442d79423a7dc673f1e2756d05fcb5f
markupsafe==3.0.4 --hash=sha256:6da83a088f8ef93b2d483a8232a4dbf4d69d3d8496b568a03c56becac43e1808
jinja2==3.1.6 --hash=sha256:85ece4451f492d0c13c5dd7c13a64681a86afae63a5f347908daf103ce6d2f67
mpmath==1.3.0 --hash=sha256:a0b2b9fe80bbcd81a6647ff13108738cfb482d481d826cc0e02f5b35e5c88d2c
networkx==3.6.1 --hash=sha256:d47fbf302e7d9cbbb9e2555a0d267983d2aa476bac30e90dfbe5669bd57f3762
setuptools==84.2.1 --hash=sha256:ca140b45d5325a9478f880e351484f62fef15f336462e449ca0c03c873d589c2
sympy==1.14.0 --hash=sha256:e091cc3e99d2141a0ba2847328f5479b05d94a6635cb96148ccb3f34671bd8f5
typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
ENVBUILD_EOF_a3dc445dc5be
  /root/.envbuild/envs/cpu-reference/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-torch-deps.txt --require-hashes --no-deps
}

# step pip:torch: torch 2.13.0+cpu
# why: torch from the index that carries the variant matched to this node
step_pip_torch() {
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/requirements && cat > /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-torch.txt <<'ENVBUILD_EOF_7dfdc2e9ab2a' && chmod 0644 /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-torch.txt
torch==2.13.0+cpu --hash=sha256:6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b
ENVBUILD_EOF_7dfdc2e9ab2a
  /root/.envbuild/envs/cpu-reference/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-torch.txt --require-hashes --no-deps --index-url https://download.pytorch.org/whl/cpu
}

# step pip:packages: 4 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/requirements && cat > /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_31f13b17c16a' && chmod 0644 /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-packages.txt
einops==0.8.2 --hash=sha256:54058201ac7087911181bfec4af6091bb59380360f069276601256a76af08193
numpy==2.4.6 --hash=sha256:89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93
regex==2026.9.29 --hash=sha256:612b709381c0355b70d89cdb51b7f670591ed5cbbc0e3b5337488019dc667b65
tqdm==4.70.1 --hash=sha256:c293e525e6fef9c20e8728fd4612df02a0aa31bb5fe91ecd93e123b1b7bffa73
ENVBUILD_EOF_31f13b17c16a
  /root/.envbuild/envs/cpu-reference/bin/python -m pip install --no-input --disable-pip-version-check -r /root/.envbuild/envs/cpu-reference/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild && cat > /root/.envbuild/envs/cpu-reference/.envbuild/env.sh <<'ENVBUILD_EOF_5844b106e0c6' && chmod 0644 /root/.envbuild/envs/cpu-reference/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/root/.envbuild/envs/cpu-reference
export PATH=/root/.envbuild/envs/cpu-reference/bin:"$PATH"
ENVBUILD_EOF_5844b106e0c6
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /root/.envbuild/envs/cpu-reference/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch numpy einops
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/smoke
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /root/.envbuild/envs/cpu-reference/.envbuild/smoke/gpt.py && chmod 0644 /root/.envbuild/envs/cpu-reference/.envbuild/smoke/gpt.py
  mkdir -p /root/.envbuild/envs/cpu-reference/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /root/.envbuild/envs/cpu-reference/.envbuild/smoke/collective.py && chmod 0644 /root/.envbuild/envs/cpu-reference/.envbuild/smoke/collective.py
  /root/.envbuild/envs/cpu-reference/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /root/.envbuild/envs/cpu-reference/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:torch-deps pip:torch pip:packages env-file import-check smoke)
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
