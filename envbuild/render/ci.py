"""Plan -> a GitHub Actions workflow that builds the image and checks it. Pure.

The workflow renders the build context itself (``envbuild render ... --format dockerfile``
from the checkout, so envbuild's own files come with it), builds it with ``docker build``,
runs ``verify.sh`` inside the image (imports, every locked version, source trees) and then
the smoke (``verify.sh --smoke``: the tiny GPT steps and the all-reduce on CPU; on GPU
recipes a self-hosted runner with GPUs, ``--gpus all``).

    .github/workflows/envbuild-<recipe>-<target>.yml
"""

from __future__ import annotations

import yaml

from envbuild.render.context import Context
from envbuild.plan.params import ImagePlan


def workflow(ip: ImagePlan) -> dict:
    rec, tgt = ip.recipe, ip.target
    tag = f"envbuild/{rec}:{tgt}"
    gpu = bool(ip.plan and any(s.kind == "smoke" for s in ip.plan.steps)) and ip.gpus
    verify = f"{ip.files_dir}/verify.sh"
    run = "docker run --rm" + (" --gpus all" if gpu else "") + " --network=none"
    # rendering this workflow needed each package without a hash accepted by name
    # (--allow-unverified): the build context it renders names the same ones
    unverified = sorted({n for st in (ip.plan.steps if ip.plan else []) if st.kind in ("pip_install", "pip_tooling")
                         for n in st.params.unverified})
    render = (f"envbuild render {rec} --target {tgt} --format dockerfile -o build/context"
              + (" --wheelhouse \"$WHEELHOUSE\"" if ip.wheelhouse else "")
              + "".join(f" --allow-unverified {n}" for n in unverified))
    steps = [
        {"uses": "actions/checkout@v4"},
        {"uses": "actions/setup-python@v5", "with": {"python-version": "3.11"}},
        {"name": "Install envbuild", "run": "python -m pip install ."},
        {"name": "Render the build context", "run": render},
        {"name": "Build the image", "run": f"docker build -t {tag} build/context"},
        {"name": "Verify the image against the lock", "run": f"{run} {tag} sh {verify}"},
        {"name": "Smoke inside the image", "run": f"{run} {tag} sh {verify} --smoke"},
    ]
    job = {"runs-on": ["self-hosted", "linux", "gpu"] if gpu else "ubuntu-latest",
           "timeout-minutes": 180 if gpu else 60, "steps": steps}
    if ip.wheelhouse:
        job["env"] = {"WHEELHOUSE": "${{ vars.ENVBUILD_WHEELHOUSE }}"}
    return {
        "name": f"envbuild image {rec} ({tgt})",
        "on": {"workflow_dispatch": {},
               "push": {"paths": [f"envbuild/recipes/data/{rec}.yaml", f"lockfiles/{rec}/{tgt}.lock",
                                  "envbuild/render/**", "envbuild/actions/**"]}},
        "permissions": {"contents": "read"},
        "jobs": {"image": job},
    }


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, value: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def render(ip: ImagePlan) -> Context:
    rec, tgt = ip.recipe, ip.target
    head = (f"# GitHub Actions: build and check the image of {rec} for {tgt}; rendered by envbuild.\n"
            f"# Regenerate: envbuild render {rec} --target {tgt} --format ci\n")
    body = yaml.dump(workflow(ip), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)
    return Context(files={f".github/workflows/envbuild-{rec}-{tgt}.yml": head + body})
