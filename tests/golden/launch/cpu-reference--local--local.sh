#!/usr/bin/env bash
# envbuild launch: cpu-reference on local through local, 1 node(s) x 0 GPU(s)
# rendered by envbuild 0.1.0 from the plan for local (facts profile:local; lock digest none)
# NOTE: once: envbuild's own GPT smoke, one process
# NOTE: source: envbuild/smoke/gpt.py
set -euo pipefail
mkdir -p .
JOB_DIR="$(cd . && pwd)"
export JOB_DIR
export ENVBUILD_JOB_ID="local-$$"
export ENVBUILD_NNODES=1
export ENVBUILD_GPUS_PER_NODE=0
export ENVBUILD_NPROC_PER_NODE=1
export ENVBUILD_MASTER_ADDR=127.0.0.1
export ENVBUILD_MASTER_PORT=29500
export ENVBUILD_NODE_RANK=0
cat > "$JOB_DIR"/envbuild-cpu-reference-local.task.sh <<'ENVBUILD_EOF_9bd9f60ef0f8'
#!/usr/bin/env bash
# task of envbuild-cpu-reference: the plan's environment, then the command
set -euo pipefail
# the environment file the plan's env-file step writes
# shellcheck source=/dev/null
. "$HOME"/.envbuild/envs/cpu-reference/.envbuild/env.sh
cd "$HOME"/.envbuild/envs/cpu-reference/.envbuild/smoke
python gpt.py --preset tiny --json
ENVBUILD_EOF_9bd9f60ef0f8
rc=0
bash "$JOB_DIR"/envbuild-cpu-reference-local.task.sh > "$JOB_DIR"/envbuild-cpu-reference-local.out 2> "$JOB_DIR"/envbuild-cpu-reference-local.err || rc=$?
echo "$rc" > "$JOB_DIR"/envbuild-cpu-reference-local.rc
exit "$rc"
