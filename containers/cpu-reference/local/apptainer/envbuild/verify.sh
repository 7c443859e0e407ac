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
  mkdir -p /opt/envbuild/cpu-reference/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/cpu-reference/.envbuild/smoke && if [ -f /opt/envbuild/cpu-reference/.envbuild/env.sh ]; then . /opt/envbuild/cpu-reference/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/cpu-reference/bin/python /opt/envbuild/cpu-reference/.envbuild/smoke/gpt.py --json --preset tiny) > /opt/envbuild/cpu-reference/.envbuild/smoke/gpt.out 2> /opt/envbuild/cpu-reference/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /opt/envbuild/cpu-reference/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /opt/envbuild/cpu-reference/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /opt/envbuild/cpu-reference/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/cpu-reference/.envbuild/smoke && if [ -f /opt/envbuild/cpu-reference/.envbuild/env.sh ]; then . /opt/envbuild/cpu-reference/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/cpu-reference/bin/python /opt/envbuild/cpu-reference/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /opt/envbuild/cpu-reference/.envbuild/smoke/collective.out 2> /opt/envbuild/cpu-reference/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /opt/envbuild/cpu-reference/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /opt/envbuild/cpu-reference/.envbuild/smoke/collective.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
