#!/bin/sh
# envbuild 0.1.0: checks the image of gpt-neox (local) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/gpt-neox/bin/python /opt/envbuild/gpt-neox/.envbuild/files/verify_image.py /opt/envbuild/gpt-neox/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/gpt-neox/.envbuild/smoke
  mkdir -p /opt/envbuild/gpt-neox/.envbuild/smoke && cp /opt/envbuild/gpt-neox/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/gpt-neox/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/gpt-neox/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/gpt-neox/.envbuild/smoke && cp /opt/envbuild/gpt-neox/.envbuild/files/assets/smoke/collective.py /opt/envbuild/gpt-neox/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/gpt-neox/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/gpt-neox/.envbuild/smoke && cp /opt/envbuild/gpt-neox/.envbuild/files/assets/smoke/apex_check.py /opt/envbuild/gpt-neox/.envbuild/smoke/apex_check.py && chmod 0644 /opt/envbuild/gpt-neox/.envbuild/smoke/apex_check.py
  /opt/envbuild/gpt-neox/bin/python /opt/envbuild/gpt-neox/.envbuild/files/envbuild_node /opt/envbuild/gpt-neox/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/gpt-neox/bin/python /opt/envbuild/gpt-neox/.envbuild/files/envbuild_node /opt/envbuild/gpt-neox/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  /opt/envbuild/gpt-neox/bin/python /opt/envbuild/gpt-neox/.envbuild/files/envbuild_node /opt/envbuild/gpt-neox/.envbuild/files/actions/capture-apex.json || failed="$failed apex(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
