#!/bin/sh
# envbuild 0.1.0: checks the image of alpa-megatron (slurm) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/alpa-megatron/bin/python /opt/envbuild/alpa-megatron/.envbuild/files/verify_image.py /opt/envbuild/alpa-megatron/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/alpa-megatron/.envbuild/smoke
  mkdir -p /opt/envbuild/alpa-megatron/.envbuild/smoke && cp /opt/envbuild/alpa-megatron/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/alpa-megatron/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/alpa-megatron/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/alpa-megatron/.envbuild/smoke && cp /opt/envbuild/alpa-megatron/.envbuild/files/assets/smoke/collective.py /opt/envbuild/alpa-megatron/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/alpa-megatron/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/alpa-megatron/.envbuild/smoke && cp /opt/envbuild/alpa-megatron/.envbuild/files/assets/smoke/apex_check.py /opt/envbuild/alpa-megatron/.envbuild/smoke/apex_check.py && chmod 0644 /opt/envbuild/alpa-megatron/.envbuild/smoke/apex_check.py
  /opt/envbuild/alpa-megatron/bin/python /opt/envbuild/alpa-megatron/.envbuild/files/envbuild_node /opt/envbuild/alpa-megatron/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/alpa-megatron/bin/python /opt/envbuild/alpa-megatron/.envbuild/files/envbuild_node /opt/envbuild/alpa-megatron/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  /opt/envbuild/alpa-megatron/bin/python /opt/envbuild/alpa-megatron/.envbuild/files/envbuild_node /opt/envbuild/alpa-megatron/.envbuild/files/actions/capture-apex.json || failed="$failed apex(exit $?)"
  /opt/envbuild/alpa-megatron/bin/python /opt/envbuild/alpa-megatron/.envbuild/files/envbuild_node /opt/envbuild/alpa-megatron/.envbuild/files/actions/capture-native.json || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
