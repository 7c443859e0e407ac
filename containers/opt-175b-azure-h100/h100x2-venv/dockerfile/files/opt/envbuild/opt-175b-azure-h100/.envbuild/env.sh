# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/opt-175b-azure-h100
export PATH=/opt/envbuild/opt-175b-azure-h100/bin:"$PATH"
export CUDA_DEVICE_MAX_CONNECTIONS=1
