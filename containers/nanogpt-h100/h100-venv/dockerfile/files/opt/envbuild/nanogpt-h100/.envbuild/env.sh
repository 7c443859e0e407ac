# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/nanogpt-h100
export PATH=/opt/envbuild/nanogpt-h100/bin:"$PATH"
