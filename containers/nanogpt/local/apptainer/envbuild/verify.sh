#!/bin/sh
# envbuild 0.1.0: checks the image of nanogpt (local) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/nanogpt/bin/python /opt/envbuild/nanogpt/.envbuild/files/verify_image.py /opt/envbuild/nanogpt/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/nanogpt/.envbuild/smoke
  mkdir -p /opt/envbuild/nanogpt/.envbuild/smoke && cp /opt/envbuild/nanogpt/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/nanogpt/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/nanogpt/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/nanogpt/.envbuild/smoke && cp /opt/envbuild/nanogpt/.envbuild/files/assets/smoke/collective.py /opt/envbuild/nanogpt/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/nanogpt/.envbuild/smoke/collective.py
  /opt/envbuild/nanogpt/bin/python /opt/envbuild/nanogpt/.envbuild/files/envbuild_node /opt/envbuild/nanogpt/.envbuild/files/actions/capture-gpt.json || failed="$failed gpt(exit $?)"
  /opt/envbuild/nanogpt/bin/python /opt/envbuild/nanogpt/.envbuild/files/envbuild_node /opt/envbuild/nanogpt/.envbuild/files/actions/capture-collective.json || failed="$failed collective(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
