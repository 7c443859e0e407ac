"""Plan -> a GitHub Actions workflow that builds the image and checks it, usable in the
repository of whoever rendered it. Pure.

The workflow renders the build context itself with the same inputs the render was given (the
recipe by name or by its path, ``--lock``, ``--base``, the accepted unverified packages), so the
image it builds is the one ``envbuild render`` described; it runs on changes to those files and
to itself. envbuild is installed from a pinned source (``EnvbuildSource``: its repository at a
commit, ``git+URL@SHA``, or a wheel by URL with its sha256, which pip checks), never a bare name
on an index (``envbuild`` on PyPI is not this project's: whoever registers it would run code in
every such job) and never ``pip install .`` (which in a user's repository would install the
user's project). The image is built with BuildKit and its layers cached between
runs in the Actions cache (``type=gha``, one scope per recipe and target); ``verify.sh`` then
runs inside the image (imports, every locked version, source trees), then the smoke
(``verify.sh --smoke``; on GPU recipes a self-hosted runner with GPUs, ``--gpus all``). Every
action is pinned by commit (``ACTIONS``: the release each commit is, read from the actions'
repositories).

    .github/workflows/envbuild-<recipe>-<target>.yml
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from envbuild import __version__
from envbuild.errors import InputError
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


SOURCE_HINT = ("--envbuild-source git+https://HOST/OWNER/envbuild.git@COMMIT (40 hex), or "
               "https://HOST/PATH/envbuild-VERSION-py3-none-any.whl#sha256=HEX (64 hex)")
_GIT = re.compile(r"git\+(https|ssh|file)://[^\s'\"$`\\]+@([0-9a-f]{40})")  # no quote, $ or space: one shell word
_WHEEL = re.compile(r"(https|file)://[^\s'\"$`\\#]+\.whl#sha256=([0-9a-f]{64})")


@dataclass(frozen=True)
class EnvbuildSource:
    """Where the workflow installs envbuild from, pinned by content: a git repository at a
    commit (``git+URL@SHA``) or a wheel by URL with its sha256 (``URL#sha256=HEX``, which pip
    checks before installing). ``spec`` is that text.

    >>> EnvbuildSource.parse("git+https://example.org/envbuild.git@" + "0" * 40).requirement()[:44]
    'envbuild @ git+https://example.org/envbuild.'
    """

    spec: str

    @classmethod
    def parse(cls, text: str, where: str = "--envbuild-source") -> EnvbuildSource:
        """``text`` if it pins envbuild by commit or by sha256; InputError otherwise (a bare
        name, a branch or tag, a wheel without its hash)."""
        if _GIT.fullmatch(text) or _WHEEL.fullmatch(text):
            return cls(spec=text)
        raise InputError(f"{where} {text!r} does not pin envbuild: a git URL at a 40-hex commit, or a wheel's "
                         "URL with #sha256= of it", hint=SOURCE_HINT)

    @classmethod
    def from_remote(cls, remote: str, commit: str) -> EnvbuildSource:
        """A git remote as ``git remote get-url`` prints it (https, ssh or scp-like
        ``user@host:path``) at ``commit``; a token in an https URL is left out (the workflow is
        committed). InputError for a remote that is a path of this machine."""
        url = remote.strip()
        if m := re.fullmatch(r"([\w.-]+@)?([\w.-]+):(?!//)(.+)", url):  # scp-like: git@host:owner/repo.git
            url = f"ssh://{m.group(1) or ''}{m.group(2)}/{m.group(3).lstrip('/')}"
        if url.startswith("https://"):
            url = "https://" + re.sub(r"^[^/@]*@", "", url.removeprefix("https://"))
        if not url.startswith(("https://", "ssh://")):
            raise InputError(f"envbuild's git remote {remote!r} is a path of this machine, which a CI runner cannot "
                             "reach", hint=SOURCE_HINT)
        return cls.parse(f"git+{url}@{commit}", where=f"envbuild's git remote {remote!r} at {commit}")

    def requirement(self) -> str:
        """The pip requirement: ``envbuild @ SPEC``."""
        return f"envbuild @ {self.spec}"


@dataclass(frozen=True)
class CiInputs:
    """What the render was given, as the workflow's checkout sees it: the recipe (a shipped
    name, or a path relative to the repository's root), the lock file and the base, if given,
    and where the workflow installs envbuild from (``source``; the render refuses to write a
    workflow without one)."""

    recipe: str
    lock: str | None = None
    base: str | None = None
    source: EnvbuildSource | None = None

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


def _source(given: CiInputs) -> EnvbuildSource:
    if given.source is None:
        raise InputError("the CI workflow installs envbuild from a pinned source, and none was given",
                         hint=SOURCE_HINT + "; from a clone of envbuild's repository with a remote, its HEAD is taken")
    return given.source


def workflow(ip: ImagePlan, given: CiInputs | None = None) -> dict:
    rec, tgt = ip.recipe, ip.target
    given = given or CiInputs(recipe=rec)
    source = _source(given)
    tag = f"envbuild/{rec}:{tgt}"
    gpu = bool(ip.plan and ip.plan.smoke() is not None) and ip.gpus
    verify = f"{ip.files_dir}/verify.sh"
    run = "docker run --rm" + (" --gpus all" if gpu else "") + " --network=none"
    # rendering this workflow needed each package without a hash accepted by name
    # (--allow-unverified): the build context it renders names the same ones
    unverified = ip.plan.unverified() if ip.plan else []
    render = (given.command(tgt, "dockerfile") + " -o build/context"
              + (" --wheelhouse \"$WHEELHOUSE\"" if ip.wheelhouse else "")
              + "".join(f" --allow-unverified {q(n)}" for n in unverified))
    workflow_file = f".github/workflows/envbuild-{rec}-{tgt}.yml"
    scope = f"envbuild-{rec}-{tgt}"
    steps = [
        {"uses": uses("actions/checkout"), "with": {"persist-credentials": False}},
        {"uses": uses("actions/setup-python"), "with": {"python-version": "3.11"}},
        # pinned by commit or by sha256 (EnvbuildSource), never a name an index resolves
        {"name": "Install envbuild (pinned)", "run": f"python -m pip install {q(source.requirement())}"},
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
    source = _source(given)
    again = given.command(tgt, "ci") + f" --envbuild-source {q(source.spec)}"
    pins = "".join(f"#   {a} {tag}\n" for a, (_sha, tag) in ACTIONS.items())
    head = (f"# GitHub Actions: build and check the image of {rec} for {tgt}; rendered by envbuild {__version__}.\n"
            f"# Regenerate: {again}\n"
            "# Actions pinned by commit, the releases:\n" + pins +
            f"# envbuild installed from {source.spec} (pinned; another: render again with --envbuild-source).\n")
    body = yaml.dump(workflow(ip, given), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)
    return Context(files={f".github/workflows/envbuild-{rec}-{tgt}.yml": head + body})
