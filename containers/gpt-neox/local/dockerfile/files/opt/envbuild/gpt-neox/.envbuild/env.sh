# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/gpt-neox
export PATH=/opt/envbuild/gpt-neox/bin:"$PATH"
