# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/alpa-megatron
export PATH=/opt/envbuild/alpa-megatron/bin:"$PATH"
