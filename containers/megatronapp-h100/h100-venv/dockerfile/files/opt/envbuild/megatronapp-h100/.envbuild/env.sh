# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/megatronapp-h100
export PATH=/opt/envbuild/megatronapp-h100/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
