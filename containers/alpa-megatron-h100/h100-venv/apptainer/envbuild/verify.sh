#!/bin/sh
# envbuild 0.1.0: checks the image of alpa-megatron-h100 (h100-venv) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/alpa-megatron-h100/bin/python /opt/envbuild/alpa-megatron-h100/.envbuild/files/verify_image.py /opt/envbuild/alpa-megatron-h100/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke && cp /opt/envbuild/alpa-megatron-h100/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke && cp /opt/envbuild/alpa-megatron-h100/.envbuild/files/assets/smoke/collective.py /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke && cp /opt/envbuild/alpa-megatron-h100/.envbuild/files/assets/smoke/apex_check.py /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/apex_check.py && chmod 0644 /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/apex_check.py
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/alpa-megatron-h100/.envbuild/smoke && if [ -f /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh ]; then . /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/alpa-megatron-h100/bin/python /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/gpt.py --json --preset tiny) > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/gpt.out 2> /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/alpa-megatron-h100/.envbuild/smoke && if [ -f /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh ]; then . /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/alpa-megatron-h100/bin/python /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/collective.out 2> /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/collective.err' >&2; fi
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/alpa-megatron-h100/.envbuild/smoke && if [ -f /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh ]; then . /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/alpa-megatron-h100/bin/python /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/apex_check.py --json --require) > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/apex.out 2> /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/apex.err || rc=$?
  echo "$rc" > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/apex.rc
  if [ "$rc" != 0 ]; then failed="$failed apex(exit $rc)"; echo 'apex failed, see /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/apex.err' >&2; fi
  mkdir -p /opt/envbuild/alpa-megatron-h100/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/alpa-megatron-h100/src/alpa/osdi22_artifact/megatron && if [ -f /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh ]; then . /opt/envbuild/alpa-megatron-h100/.envbuild/env.sh; fi && env PYTHONPATH=/opt/envbuild/alpa-megatron-h100/src/alpa PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 timeout 3600 bash -c 'python benchmark_gpt.py --nproc_per_node 1') > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/native.out 2> /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/native.err || rc=$?
  echo "$rc" > /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/native.rc
  if [ "$rc" != 0 ]; then failed="$failed native(exit $rc)"; echo 'native failed, see /opt/envbuild/alpa-megatron-h100/.envbuild/smoke/native.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
