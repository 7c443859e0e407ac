#!/bin/sh
# envbuild 0.1.0: checks the image of h100-megatron-deepspeed (h100-venv) against its lock.
# usage: verify.sh [--smoke]   (run inside the image)
set -eu
/opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/verify_image.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/verify.json
if [ "${1:-}" = --smoke ]; then
  failed=''
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/assets/smoke/gpt.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.py && chmod 0644 /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.py
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/assets/smoke/collective.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.py && chmod 0644 /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.py
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && cp /opt/envbuild/h100-megatron-deepspeed/.envbuild/files/assets/smoke/apex_check.py /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex_check.py && chmod 0644 /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex_check.py
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && if [ -f /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh ]; then . /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.py --json --preset tiny) > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.out 2> /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.err || rc=$?
  echo "$rc" > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.rc
  if [ "$rc" != 0 ]; then failed="$failed gpt(exit $rc)"; echo 'gpt failed, see /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/gpt.err' >&2; fi
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && if [ -f /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh ]; then . /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.py --json --device cpu --nproc 2) > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.out 2> /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.err || rc=$?
  echo "$rc" > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.rc
  if [ "$rc" != 0 ]; then failed="$failed collective(exit $rc)"; echo 'collective failed, see /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/collective.err' >&2; fi
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null
  (cd /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke && if [ -f /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh ]; then . /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh; fi && timeout 1800 /opt/envbuild/h100-megatron-deepspeed/bin/python /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex_check.py --json --require) > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex.out 2> /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex.err || rc=$?
  echo "$rc" > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex.rc
  if [ "$rc" != 0 ]; then failed="$failed apex(exit $rc)"; echo 'apex failed, see /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/apex.err' >&2; fi
  mkdir -p /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke
  rc=0
  # shellcheck source=/dev/null disable=SC2016
  (cd /opt/envbuild/h100-megatron-deepspeed/src/megatron-deepspeed && if [ -f /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh ]; then . /opt/envbuild/h100-megatron-deepspeed/.envbuild/env.sh; fi && env PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 timeout 3600 bash -c 'set -e; mkdir -p /tmp/envbuild-megatron-data; python -c "import sys, numpy as np, torch; from megatron.data import indexed_dataset as d; b = d.make_builder(sys.argv[1] + '"'"'.bin'"'"', impl='"'"'mmap'"'"', vocab_size=50304); r = np.random.default_rng(0); [(b.add_item(torch.from_numpy(r.integers(0, 50303, 2049, dtype=np.int64))), b.end_document()) for _ in range(4096)]; b.finalize(sys.argv[1] + '"'"'.idx'"'"')" /tmp/envbuild-megatron-data/synthetic_text_document; NGPU=$(python -c "import torch; print(max(1, torch.cuda.device_count()))"); GBS=$((16 * NGPU)); printf '"'"'{"train_batch_size": %d, "train_micro_batch_size_per_gpu": 16, "steps_per_print": 10, "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}, "gradient_clipping": 1.0, "wall_clock_breakdown": false}'"'"' "$GBS" > /tmp/envbuild-megatron-data/ds_config.json; python -m torch.distributed.run --standalone --nproc_per_node "$NGPU" pretrain_gpt.py --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 16 --global-batch-size "$GBS" --train-iters 40 --lr 1.0e-4 --min-lr 1.0e-5 --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0 --bf16 --data-path /tmp/envbuild-megatron-data/synthetic_text_document --data-impl mmap --split 100,0,0 --tokenizer-type NullTokenizer --vocab-size 50303 --log-interval 5 --eval-iters 0 --eval-interval 1000 --no-masked-softmax-fusion --no-gradient-accumulation-fusion --no-async-tensor-model-parallel-allreduce --distributed-backend nccl --no-pipeline-parallel --deepspeed --deepspeed_config /tmp/envbuild-megatron-data/ds_config.json --zero-stage 1') > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/native.out 2> /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/native.err || rc=$?
  echo "$rc" > /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/native.rc
  if [ "$rc" != 0 ]; then failed="$failed native(exit $rc)"; echo 'native failed, see /opt/envbuild/h100-megatron-deepspeed/.envbuild/smoke/native.err' >&2; fi
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
  echo 'smoke passed'
fi
