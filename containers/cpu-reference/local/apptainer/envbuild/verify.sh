#!/bin/sh
# envbuild 0.1.0: checks the image of cpu-reference (local) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/cpu-reference/bin/python /opt/envbuild/cpu-reference/.envbuild/files/verify_image.py /opt/envbuild/cpu-reference/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/cpu-reference/.envbuild/smoke
  mkdir -p /opt/envbuild/cpu-reference/.envbuild/smoke && cp /opt/envbuild/cpu-reference/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/cpu-reference/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/cpu-reference/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/cpu-reference/.envbuild/smoke && cp /opt/envbuild/cpu-reference/.envbuild/files/assets/smoke/collective.py /opt/envbuild/cpu-reference/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/cpu-reference/.envbuild/smoke/collective.py
  /opt/envbuild/cpu-reference/bin/python /opt/envbuild/cpu-reference/.envbuild/files/envbuild_node /opt/envbuild/cpu-reference/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/cpu-reference/bin/python /opt/envbuild/cpu-reference/.envbuild/files/envbuild_node /opt/envbuild/cpu-reference/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
