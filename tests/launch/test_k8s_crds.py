"""The custom resources envbuild renders (a JobSet, a Kubeflow Trainer v2 TrainJob, a legacy PyTorchJob) validated against the
CRD schemas their projects publish (issue 40), read at a pinned release from a git mirror of
each project (ENVBUILD_GIT_MIRROR: CI has no GitHub, so there the test says so and skips; the
built-in kinds are validated in CI by kubernetes-validate, tests/launch/test_launch_render.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from envbuild.gitsrc import mirror_path
from envbuild.launch import LaunchOptions, render_launch
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.launchcases import IMAGE, plan_for

# (url, release tag, its commit, the CRD file, the kind, the served version)
CRDS = {
    "jobset": ("https://github.com/kubernetes-sigs/jobset", "v0.12.0", "f22e565ac3cc3265c7c45ef67ecffdc689af5d77",
               "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml", "JobSet", "v1alpha2"),
    "trainjob": ("https://github.com/kubeflow/trainer", "v2.3.0", "658725bdae5c7e3a0854d93ac6ff492e109a22ab",
                 "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml", "TrainJob", "v1alpha1"),
    "pytorchjob": ("https://github.com/kubeflow/training-operator", "v1.9.0",
                   "6f74c7f6b2ed6c27aabd82d0a316b23f0646059c", "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
                   "PyTorchJob", "v1"),
}


def crd_schema(url: str, commit: str, path: str, version: str) -> dict:
    root = os.environ.get("ENVBUILD_GIT_MIRROR")
    repo = mirror_path(url, root) if root and Path(root).is_dir() else None
    if repo is None:
        pytest.skip(f"no git mirror of {url} here (CI has no GitHub): set ENVBUILD_GIT_MIRROR to validate "
                    "against its published CRD")
    crd = yaml.safe_load(subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                                        capture_output=True, text=True, timeout=60).stdout)
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return served["schema"]["openAPIV3Schema"]


@pytest.mark.lint
@pytest.mark.parametrize("workload", sorted(CRDS))
def test_the_custom_resource_validates_against_its_projects_crd(workload):
    url, _tag, commit, path, kind, version = CRDS[workload]
    schema = crd_schema(url, commit, path, version)
    rec, tgt = load_recipe("megatronapp"), load_target("rtx4090-pod")
    text = render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="k8s", variant="two-pods",
                                                                     container_image=IMAGE, k8s_workload=workload)).text
    (doc,) = [d for d in yaml.safe_load_all(text) if d["kind"] == kind]
    assert doc["apiVersion"].endswith("/" + version)
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=str)
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors][:5]
    # the schema does check: the same resource with a number field given as text is refused
    spec = dict(doc["spec"])
    if kind == "JobSet":
        spec["suspend"] = "no"
    elif kind == "TrainJob":
        spec["trainer"] = {**spec["trainer"], "numNodes": "two"}
    else:
        spec["runPolicy"] = {**spec["runPolicy"], "backoffLimit": "no"}
    assert any(validator.iter_errors({**doc, "spec": spec}))
