# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/megatron-deepspeed-slurm-h100
export PATH=/opt/envbuild/megatron-deepspeed-slurm-h100/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
