#!/bin/sh
# envbuild 0.1.0: checks the image of h100-megatron-deepspeed (h100-venv) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/verify_image.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/assets/smoke/collective.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/assets/smoke/apex_check.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex_check.py && chmod 0644 /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex_check.py
  /opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/envbuild_node /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/envbuild_node /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  /opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/envbuild_node /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/actions/capture-apex.json || failed="$failed apex(exit $?)"
  /opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/envbuild_node /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/actions/capture-native.json || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
