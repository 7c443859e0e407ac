# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/megatron-deepspeed-slurm
export PATH=/opt/envbuild/megatron-deepspeed-slurm/bin:"$PATH"
