# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/nanogpt
export PATH=/opt/envbuild/nanogpt/bin:"$PATH"
