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
  mkdir -p /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke && if [ -f /opt/envbuild/polaris-megatron-deepspeed/.envbuild/env.sh ]; then . /opt/envbuild/polaris-megatron-deepspeed/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/polaris-megatron-deepspeed/bin/python /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/gpt.py --json --preset tiny) > /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/gpt.out 2> /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke && if [ -f /opt/envbuild/polaris-megatron-deepspeed/.envbuild/env.sh ]; then . /opt/envbuild/polaris-megatron-deepspeed/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/polaris-megatron-deepspeed/bin/python /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/collective.out 2> /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/collective.err' >&2; fi
  mkdir -p /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null disable=SC2016
  (cd /opt/envbuild/polaris-megatron-deepspeed/src/megatron-deepspeed && if [ -f /opt/envbuild/polaris-megatron-deepspeed/.envbuild/env.sh ]; then . /opt/envbuild/polaris-megatron-deepspeed/.envbuild/env.sh; fi && env MODEL_SIZE_KEY=GPT25B SEQ_LEN=4096 USE_FLASH_ATTN_V2=1 MICRO_BATCH=1 GAS=1 SP_TYPE=megatron ZERO_STAGE=1 timeout 3600 bash -c '# the training output goes to a log the script names and appends to logfiles: the
# log named by the first new line of the index is printed after the command
envbuild_seen=$(wc -l 2>/dev/null < logfiles || echo 0)
envbuild_rc=0
# train-gpt3.sh starts training in the background and returns: sourced, then its job is awaited
( set +euo pipefail
  # shellcheck source=/dev/null
  . ./ALCF/train-gpt3.sh
  status=$?
  job="${!:-}"
  if [ -z "$job" ]; then exit "$status"; fi
  wait "$job"; status=$?
  wait
  exit "$status" ) || envbuild_rc=$?
envbuild_log=$(tail -n +"$((envbuild_seen + 1))" logfiles 2>/dev/null | head -n 1)
if [ -n "$envbuild_log" ] && [ -f "$envbuild_log" ]; then
  echo '"'"'envbuild: the training output is in'"'"' "$envbuild_log:"
  cat -- "$envbuild_log"
else
  echo '"'"'envbuild: the command named no new log in logfiles'"'"' >&2
fi
exit "$envbuild_rc"') > /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/native.out 2> /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/native.err || rc=$?
  echo "$rc" > /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/native.rc
  if [ "$rc" != 0 ]; then failed="$failed native(exit $rc)"; echo 'native failed, see /opt/envbuild/polaris-megatron-deepspeed/.envbuild/smoke/native.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
