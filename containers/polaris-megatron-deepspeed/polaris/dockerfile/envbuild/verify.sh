#!/bin/sh
# envbuild 0.1.0: checks the image of polaris-megatron-deepspeed (polaris) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/polaris-megatron-deepspeed/bin/python /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/verify_image.py /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke
  mkdir -p /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/assets/smoke/collective.py /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/collective.py
  /opt/envbuild/polaris-megatron-deepspeed/bin/python /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/envbuild_node /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/polaris-megatron-deepspeed/bin/python /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/envbuild_node /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  /opt/envbuild/polaris-megatron-deepspeed/bin/python /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/envbuild_node /opt/envbuild/polaris-megatron-deepspeed/.envbuild/files/actions/capture-native.json || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
