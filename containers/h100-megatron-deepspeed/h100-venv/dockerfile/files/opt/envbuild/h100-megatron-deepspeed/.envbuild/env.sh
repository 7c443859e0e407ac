# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/h100-megatron-deepspeed
export PATH=/opt/envbuild/h100-megatron-deepspeed/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
export WANDB_MODE=disabled
