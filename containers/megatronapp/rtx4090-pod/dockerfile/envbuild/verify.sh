#!/bin/sh
# envbuild 0.1.0: checks the image of megatronapp (rtx4090-pod) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/megatronapp/bin/python /opt/envbuild/megatronapp/.envbuild/files/verify_image.py /opt/envbuild/megatronapp/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/megatronapp/.envbuild/smoke
  mkdir -p /opt/envbuild/megatronapp/.envbuild/smoke && cp /opt/envbuild/megatronapp/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/megatronapp/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/megatronapp/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/megatronapp/.envbuild/smoke && cp /opt/envbuild/megatronapp/.envbuild/files/assets/smoke/collective.py /opt/envbuild/megatronapp/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/megatronapp/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/megatronapp/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/megatronapp/.envbuild/smoke && if [ -f /opt/envbuild/megatronapp/.envbuild/env.sh ]; then . /opt/envbuild/megatronapp/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/megatronapp/bin/python /opt/envbuild/megatronapp/.envbuild/smoke/gpt.py --json --preset tiny) > /opt/envbuild/megatronapp/.envbuild/smoke/gpt.out 2> /opt/envbuild/megatronapp/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /opt/envbuild/megatronapp/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /opt/envbuild/megatronapp/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /opt/envbuild/megatronapp/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/megatronapp/.envbuild/smoke && if [ -f /opt/envbuild/megatronapp/.envbuild/env.sh ]; then . /opt/envbuild/megatronapp/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/megatronapp/bin/python /opt/envbuild/megatronapp/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /opt/envbuild/megatronapp/.envbuild/smoke/collective.out 2> /opt/envbuild/megatronapp/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /opt/envbuild/megatronapp/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /opt/envbuild/megatronapp/.envbuild/smoke/collective.err' >&2; fi
  mkdir -p /opt/envbuild/megatronapp/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null disable=SC2016
  (cd /opt/envbuild/megatronapp/src/megatronapp && if [ -f /opt/envbuild/megatronapp/.envbuild/env.sh ]; then . /opt/envbuild/megatronapp/.envbuild/env.sh; fi && timeout 3600 bash -c '# the command writes its training output into trace_pipeline_4_model_chunks_4.txt: a stale copy is removed,
# the file is printed after the command
rm -f -- trace_pipeline_4_model_chunks_4.txt
envbuild_rc=0
bash run_single.sh --pipeline_parallel 4 --model_chunks 4 || envbuild_rc=$?
if [ -f trace_pipeline_4_model_chunks_4.txt ]; then echo '"'"'envbuild: the training output is in trace_pipeline_4_model_chunks_4.txt:'"'"'; cat -- trace_pipeline_4_model_chunks_4.txt; else echo '"'"'envbuild: trace_pipeline_4_model_chunks_4.txt was not written'"'"' >&2; fi
exit "$envbuild_rc"') > /opt/envbuild/megatronapp/.envbuild/smoke/native.out 2> /opt/envbuild/megatronapp/.envbuild/smoke/native.err || rc=$?
  echo "$rc" > /opt/envbuild/megatronapp/.envbuild/smoke/native.rc
  if [ "$rc" != 0 ]; then failed="$failed native(exit $rc)"; echo 'native failed, see /opt/envbuild/megatronapp/.envbuild/smoke/native.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
