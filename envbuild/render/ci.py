"""Plan -> a GitHub Actions workflow that builds the image and checks it, usable in the
repository of whoever rendered it. Pure.

The workflow renders the build context itself with the same inputs the render was given (the
recipe by name or by its path, ``--lock``, ``--base``, the accepted unverified packages), so the
image it builds is the one ``envbuild render`` described; it runs on changes to those files and
to itself. envbuild is installed pinned (``envbuild==VERSION``, or the wheel the repository's
``ENVBUILD_WHEEL`` variable names), never ``pip install .`` (which in a user's repository would
install the user's project). The image is built with BuildKit and its layers cached between
runs in the Actions cache (``type=gha``, one scope per recipe and target); ``verify.sh`` then
runs inside the image (imports, every locked version, source trees), then the smoke
(``verify.sh --smoke``; on GPU recipes a self-hosted runner with GPUs, ``--gpus all``). Every
action is pinned by commit (``ACTIONS``: the release each commit is, read from the actions'
repositories).

    .github/workflows/envbuild-<recipe>-<target>.yml
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from envbuild import __version__
from envbuild.plan.params import ImagePlan
from envbuild.render.context import Context
from envbuild.render.shell import q

# action -> (commit, the release tag at that commit), read with `git rev-parse TAG^{commit}` in
# each action's repository (2026-11-26: the newest release of each)
ACTIONS = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "docker/setup-buildx-action": ("37fe631027851001ddb9b187196cc803df7f5f0e", "v4.3.0"),
    "docker/build-push-action": ("53b7df96c91f9c12dcc8a07bcb9ccacbed38856a", "v7.3.0"),
}


def uses(action: str) -> str:
    sha, _tag = ACTIONS[action]
    return f"{action}@{sha}"


@dataclass(frozen=True)
class CiInputs:
    """What the render was given, as the workflow's checkout sees it: the recipe (a shipped
    name, or a path relative to the repository's root), the lock file and the base, if given."""

    recipe: str
    lock: str | None = None
    base: str | None = None

    def paths(self) -> list[str]:
        """The repository files the image comes from (the workflow's triggers)."""
        return [p for p in (self.recipe, self.lock) if p and ("/" in p or p.endswith((".yaml", ".yml", ".lock")))]

    def command(self, target: str, fmt: str) -> str:
        """``envbuild render`` of these inputs in ``fmt``, each value a quoted shell word (the
        workflow runs it in bash; Actions expressions are refused in ``_ci_inputs``)."""
        words = ["envbuild", "render", q(self.recipe), "--target", q(target)]
        words += ["--lock", q(self.lock)] if self.lock else []
        words += ["--base", q(self.base)] if self.base else []
        return " ".join([*words, "--format", fmt])


def workflow(ip: ImagePlan, given: CiInputs | None = None) -> dict:
    rec, tgt = ip.recipe, ip.target
    given = given or CiInputs(recipe=rec)
    tag = f"envbuild/{rec}:{tgt}"
    gpu = bool(ip.plan and any(s.kind == "smoke" for s in ip.plan.steps)) and ip.gpus
    verify = f"{ip.files_dir}/verify.sh"
    run = "docker run --rm" + (" --gpus all" if gpu else "") + " --network=none"
    # rendering this workflow needed each package without a hash accepted by name
    # (--allow-unverified): the build context it renders names the same ones
    unverified = sorted({n for st in (ip.plan.steps if ip.plan else []) if st.kind in ("pip_install", "pip_tooling")
                         for n in st.params.unverified})
    render = (given.command(tgt, "dockerfile") + " -o build/context"
              + (" --wheelhouse \"$WHEELHOUSE\"" if ip.wheelhouse else "")
              + "".join(f" --allow-unverified {q(n)}" for n in unverified))
    workflow_file = f".github/workflows/envbuild-{rec}-{tgt}.yml"
    scope = f"envbuild-{rec}-{tgt}"
    steps = [
        {"uses": uses("actions/checkout"), "with": {"persist-credentials": False}},
        {"uses": uses("actions/setup-python"), "with": {"python-version": "3.11"}},
        {"name": f"Install envbuild {__version__}",
         "run": f'python -m pip install "${{ENVBUILD_WHEEL:-envbuild=={__version__}}}"',
         "env": {"ENVBUILD_WHEEL": "${{ vars.ENVBUILD_WHEEL }}"}},
        {"name": "Render the build context", "run": render},
        {"uses": uses("docker/setup-buildx-action")},
        {"name": "Build the image (its layers cached between runs)", "uses": uses("docker/build-push-action"),
         "with": {"context": "build/context", "tags": tag, "load": True,
                  "cache-from": f"type=gha,scope={scope}", "cache-to": f"type=gha,mode=max,scope={scope}"}},
        {"name": "Verify the image against the lock", "run": f"{run} {tag} sh {verify}"},
        {"name": "Smoke inside the image", "run": f"{run} {tag} sh {verify} --smoke"},
    ]
    job = {"runs-on": ["self-hosted", "linux", "gpu"] if gpu else "ubuntu-latest",
           "timeout-minutes": 180 if gpu else 60, "steps": steps}
    if ip.wheelhouse:
        job["env"] = {"WHEELHOUSE": "${{ vars.ENVBUILD_WHEELHOUSE }}"}
    paths = [*given.paths(), workflow_file]
    return {
        "name": f"envbuild image {rec} ({tgt})",
        "on": {"workflow_dispatch": {}, "push": {"paths": paths}, "pull_request": {"paths": paths}},
        "permissions": {"contents": "read"},
        "jobs": {"image": job},
    }


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # the two trigger lists written out, no &id001
        return True


def _str(dumper, value: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def render(ip: ImagePlan, given: CiInputs | None = None) -> Context:
    rec, tgt = ip.recipe, ip.target
    given = given or CiInputs(recipe=rec)
    again = given.command(tgt, "ci")
    pins = "".join(f"#   {a} {tag}\n" for a, (_sha, tag) in ACTIONS.items())
    head = (f"# GitHub Actions: build and check the image of {rec} for {tgt}; rendered by envbuild {__version__}.\n"
            f"# Regenerate: {again}\n"
            "# Actions pinned by commit, the releases:\n" + pins +
            "# Another envbuild build: the repository variable ENVBUILD_WHEEL (a wheel's URL or a requirement).\n")
    body = yaml.dump(workflow(ip, given), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)
    return Context(files={f".github/workflows/envbuild-{rec}-{tgt}.yml": head + body})
