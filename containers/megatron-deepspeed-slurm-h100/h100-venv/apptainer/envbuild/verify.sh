#!/bin/sh
# envbuild 0.1.0: checks the image of megatron-deepspeed-slurm-h100 (h100-venv) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/megatron-deepspeed-slurm-h100/bin/python /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/verify_image.py /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke && cp /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke && cp /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/assets/smoke/collective.py /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke && cp /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/assets/smoke/apex_check.py /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke/apex_check.py && chmod 0644 /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/smoke/apex_check.py
  /opt/envbuild/megatron-deepspeed-slurm-h100/bin/python /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/envbuild_node /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/megatron-deepspeed-slurm-h100/bin/python /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/envbuild_node /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  /opt/envbuild/megatron-deepspeed-slurm-h100/bin/python /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/envbuild_node /opt/envbuild/megatron-deepspeed-slurm-h100/.envbuild/files/actions/capture-apex.json || failed="$failed apex(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
