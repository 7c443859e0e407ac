#!/bin/sh
# envbuild 0.1.0: checks the image of opt-175b-azure (azure-nd96) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/opt-175b-azure/bin/python /opt/envbuild/opt-175b-azure/.envbuild/files/verify_image.py /opt/envbuild/opt-175b-azure/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/opt-175b-azure/.envbuild/smoke
  mkdir -p /opt/envbuild/opt-175b-azure/.envbuild/smoke && cp /opt/envbuild/opt-175b-azure/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/opt-175b-azure/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/opt-175b-azure/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/opt-175b-azure/.envbuild/smoke && cp /opt/envbuild/opt-175b-azure/.envbuild/files/assets/smoke/collective.py /opt/envbuild/opt-175b-azure/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/opt-175b-azure/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/opt-175b-azure/.envbuild/smoke && cp /opt/envbuild/opt-175b-azure/.envbuild/files/assets/smoke/apex_check.py /opt/envbuild/opt-175b-azure/.envbuild/smoke/apex_check.py && chmod 0644 /opt/envbuild/opt-175b-azure/.envbuild/smoke/apex_check.py
  /opt/envbuild/opt-175b-azure/bin/python /opt/envbuild/opt-175b-azure/.envbuild/files/envbuild_node /opt/envbuild/opt-175b-azure/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/opt-175b-azure/bin/python /opt/envbuild/opt-175b-azure/.envbuild/files/envbuild_node /opt/envbuild/opt-175b-azure/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  /opt/envbuild/opt-175b-azure/bin/python /opt/envbuild/opt-175b-azure/.envbuild/files/envbuild_node /opt/envbuild/opt-175b-azure/.envbuild/files/actions/capture-apex.json || failed="$failed apex(exit $?)"
  /opt/envbuild/opt-175b-azure/bin/python /opt/envbuild/opt-175b-azure/.envbuild/files/envbuild_node /opt/envbuild/opt-175b-azure/.envbuild/files/actions/capture-native.json || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
