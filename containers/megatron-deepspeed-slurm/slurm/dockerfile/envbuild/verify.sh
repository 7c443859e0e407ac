#!/bin/sh
# envbuild 0.1.0: checks the image of megatron-deepspeed-slurm (slurm) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/megatron-deepspeed-slurm/bin/python /opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/verify_image.py /opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke && cp /opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke && cp /opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/assets/smoke/collective.py /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke && if [ -f /opt/envbuild/megatron-deepspeed-slurm/.envbuild/env.sh ]; then . /opt/envbuild/megatron-deepspeed-slurm/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/megatron-deepspeed-slurm/bin/python /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/gpt.py --json --preset tiny) > /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/gpt.out 2> /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke && if [ -f /opt/envbuild/megatron-deepspeed-slurm/.envbuild/env.sh ]; then . /opt/envbuild/megatron-deepspeed-slurm/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/megatron-deepspeed-slurm/bin/python /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/collective.out 2> /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/collective.err' >&2; fi
  mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed && if [ -f /opt/envbuild/megatron-deepspeed-slurm/.envbuild/env.sh ]; then . /opt/envbuild/megatron-deepspeed-slurm/.envbuild/env.sh; fi && timeout 3600 bash -c 'sbatch --wait /opt/envbuild/megatron-deepspeed-slurm/src/slurm-scripts/megatron_ds_snmg.slurm') > /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/native.out 2> /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/native.err || rc=$?
  echo "$rc" > /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/native.rc
  if [ "$rc" != 0 ]; then failed="$failed native(exit $rc)"; echo 'native failed, see /opt/envbuild/megatron-deepspeed-slurm/.envbuild/smoke/native.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
