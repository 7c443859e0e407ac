#!/bin/sh
# envbuild 0.1.0: prepares a container of the image of megatron-deepspeed-slurm (slurm) before its run.
# usage: prepare.sh   (inside the container, before the training command; envbuild launch runs it)
# data without a sha256 in the recipe (oscar-1gb, gpt2-vocab, gpt2-merges) is not baked into a
# layer: /opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/prepare.sh fetches it when a
# container starts (network needed there; the first fetch's sha256 is recorded in the container
# and printed, later fetches must match it) and runs build:megatron-deepspeed, which reads it;
# envbuild launch runs it before the training command. Record the sha256 in the recipe's data
# section to bake the file
set -eu
# step data:megatron-deepspeed: 3 data file(s) for megatron-deepspeed
mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/data
mkdir -p /opt/envbuild/megatron-deepspeed-slurm/.envbuild/tools && cp /opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/assets/node/fetch_data.py /opt/envbuild/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py && chmod 0644 /opt/envbuild/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py
/opt/envbuild/megatron-deepspeed-slurm/bin/python /opt/envbuild/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py --name oscar-1gb --url https://huggingface.co/bigscience/misc-test-data/resolve/main/stas/oscar-1GB.jsonl.xz --dest /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed/oscar-1GB.jsonl.xz --record-dir /opt/envbuild/megatron-deepspeed-slurm/.envbuild/data --decompress xz --root /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed
/opt/envbuild/megatron-deepspeed-slurm/bin/python /opt/envbuild/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py --name gpt2-vocab --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-vocab.json --dest /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed/gpt2-vocab.json --record-dir /opt/envbuild/megatron-deepspeed-slurm/.envbuild/data --root /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed
/opt/envbuild/megatron-deepspeed-slurm/bin/python /opt/envbuild/megatron-deepspeed-slurm/.envbuild/tools/fetch_data.py --name gpt2-merges --url https://s3.amazonaws.com/models.huggingface.co/bert/gpt2-merges.txt --dest /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed/gpt2-merges.txt --record-dir /opt/envbuild/megatron-deepspeed-slurm/.envbuild/data --root /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed
# step build:megatron-deepspeed: build megatron-deepspeed
(cd /opt/envbuild/megatron-deepspeed-slurm/src/megatron-deepspeed && env PATH=/opt/envbuild/megatron-deepspeed-slurm/bin:"$PATH" bash -ec 'python tools/preprocess_data.py --input oscar-1GB.jsonl --output-prefix my-gpt2 --vocab gpt2-vocab.json --dataset-impl mmap --tokenizer-type GPT2BPETokenizer --merge-file gpt2-merges.txt --append-eod --workers 8')
