# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/megatronapp
export PATH=/opt/envbuild/megatronapp/bin:"$PATH"
