# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/gpt-neox-sm90
export PATH=/opt/envbuild/gpt-neox-sm90/bin:"$PATH"
