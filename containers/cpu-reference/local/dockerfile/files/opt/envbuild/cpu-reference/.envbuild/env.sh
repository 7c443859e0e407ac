# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/cpu-reference
export PATH=/opt/envbuild/cpu-reference/bin:"$PATH"
