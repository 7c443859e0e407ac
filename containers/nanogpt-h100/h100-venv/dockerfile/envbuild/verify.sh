#!/bin/sh
# envbuild 0.1.0: checks the image of nanogpt-h100 (h100-venv) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/nanogpt-h100/bin/python /opt/envbuild/nanogpt-h100/.envbuild/files/verify_image.py /opt/envbuild/nanogpt-h100/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/nanogpt-h100/.envbuild/smoke
  mkdir -p /opt/envbuild/nanogpt-h100/.envbuild/smoke && cp /opt/envbuild/nanogpt-h100/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/nanogpt-h100/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/nanogpt-h100/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/nanogpt-h100/.envbuild/smoke && cp /opt/envbuild/nanogpt-h100/.envbuild/files/assets/smoke/collective.py /opt/envbuild/nanogpt-h100/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/nanogpt-h100/.envbuild/smoke/collective.py
  /opt/envbuild/nanogpt-h100/bin/python /opt/envbuild/nanogpt-h100/.envbuild/files/envbuild_node /opt/envbuild/nanogpt-h100/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/nanogpt-h100/bin/python /opt/envbuild/nanogpt-h100/.envbuild/files/envbuild_node /opt/envbuild/nanogpt-h100/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  /opt/envbuild/nanogpt-h100/bin/python /opt/envbuild/nanogpt-h100/.envbuild/files/envbuild_node /opt/envbuild/nanogpt-h100/.envbuild/files/actions/capture-native.json || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
