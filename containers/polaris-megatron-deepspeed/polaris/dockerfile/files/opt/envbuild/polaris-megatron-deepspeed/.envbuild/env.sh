# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/polaris-megatron-deepspeed
export PATH=/opt/envbuild/polaris-megatron-deepspeed/bin:"$PATH"
