#!/usr/bin/env bash
# envbuild launch: alpa-megatron on azure-nd96 through local, 1 node(s) x 1 GPU(s)
# rendered by envbuild 0.1.0 from the plan for azure-nd96 (facts profile:azure-nd96; lock digest
# none)
# NOTE: once: benchmark_gpt.py --nproc_per_node 1 starts torch.distributed.launch itself
# NOTE: source:
# alpa-projects/alpa@e0ae8bf849ead61e65197cbeb24ce6435712e170:osdi22_artifact/megatron/benchmark_gpt.py
set -euo pipefail
mkdir -p .
JOB_DIR="$(cd . && pwd)"
export JOB_DIR
export ENVBUILD_JOB_ID="local-$$"
export ENVBUILD_NNODES=1
export ENVBUILD_GPUS_PER_NODE=1
export ENVBUILD_NPROC_PER_NODE=1
export ENVBUILD_MASTER_ADDR=127.0.0.1
export ENVBUILD_MASTER_PORT=29500
export ENVBUILD_NODE_RANK=0
cat > "$JOB_DIR"/envbuild-alpa-megatron-local.task.sh <<'ENVBUILD_EOF_946f7a84910a'
#!/usr/bin/env bash
# task of envbuild-alpa-megatron: the plan's environment, then the command
set -euo pipefail
# the environment file the plan's env-file step writes
# shellcheck source=/dev/null
. /mnt/envbuild/envs/alpa-megatron/.envbuild/env.sh
export PYTHONPATH=/mnt/envbuild/envs/alpa-megatron/src/alpa
cd /mnt/envbuild/envs/alpa-megatron/src/alpa/osdi22_artifact/megatron
python benchmark_gpt.py --nproc_per_node 1
ENVBUILD_EOF_946f7a84910a
rc=0
bash "$JOB_DIR"/envbuild-alpa-megatron-local.task.sh > "$JOB_DIR"/envbuild-alpa-megatron-local.out 2> "$JOB_DIR"/envbuild-alpa-megatron-local.err || rc=$?
echo "$rc" > "$JOB_DIR"/envbuild-alpa-megatron-local.rc
exit "$rc"
