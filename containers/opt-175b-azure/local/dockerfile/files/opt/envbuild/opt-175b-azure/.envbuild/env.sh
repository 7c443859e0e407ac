# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/opt/envbuild/opt-175b-azure
export PATH=/opt/envbuild/opt-175b-azure/bin:"$PATH"
