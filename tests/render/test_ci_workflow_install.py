"""The CI workflow ``render --format ci`` writes installs envbuild from a pinned source (a commit
of its repository, or a wheel with its sha256), never a bare name on an index envbuild does not
own (issue 53: ``envbuild==0.1.0`` on PyPI is not this project).

The integration test runs the workflow's own shell steps (install, then render) in a fresh git
repository, with a real pip into a fresh venv (setup-python's stand-in), envbuild taken from a
clone of this checkout at its HEAD; envbuild's dependencies come through pip's configured
indexes and its cache. The default source (no ``--envbuild-source``) is read from a git
checkout's HEAD and remote, tried on repositories made here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envbuild.errors import InputError
from envbuild.flows.render import envbuild_source
from support.clirun import envbuild
from support.paths import ROOT



def git(*argv, cwd=None) -> str:
    return subprocess.run(["git", *map(str, argv)], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}).stdout.strip()


def repo_with_remote(path: Path, remote: str | None) -> str:
    git("init", "-q", path)
    (path / "f").write_text("x\n")
    git("add", "f", cwd=path)
    git("commit", "-qm", "one", cwd=path)
    if remote:
        git("remote", "add", "origin", remote, cwd=path)
    return git("rev-parse", "HEAD", cwd=path)


def test_the_default_source_is_the_checkouts_head_at_its_remote_without_a_token(tmp_path) -> None:
    sha = repo_with_remote(tmp_path / "a", "https://user:ghp_secret@example.org/me/envbuild.git")
    assert envbuild_source(None, tmp_path / "a").spec == f"git+https://example.org/me/envbuild.git@{sha}"
    sha = repo_with_remote(tmp_path / "b", "git@example.org:me/envbuild.git")
    assert envbuild_source(None, tmp_path / "b").spec == f"git+ssh://git@example.org/me/envbuild.git@{sha}"
    # a remote that is a path of this machine, no remote, no checkout: refused, with the option's form
    repo_with_remote(tmp_path / "c", str(tmp_path / "a"))
    repo_with_remote(tmp_path / "d", None)
    (tmp_path / "e").mkdir()
    for folder, said in (("c", "a path of this machine"), ("d", "has no git remotes"), ("e", "not a git checkout")):
        with pytest.raises(InputError, match=said) as err:
            envbuild_source(None, tmp_path / folder)
        assert "--envbuild-source git+https://" in err.value.hint


def test_a_source_that_does_not_pin_envbuild_is_refused_before_anything_is_written(tmp_path) -> None:
    for spec in ("envbuild==0.1.0", "envbuild", "git+https://example.org/envbuild.git@main",
                 "https://example.org/envbuild-0.1.0-py3-none-any.whl",
                 "git+https://example.org/e.git@" + "0" * 40 + " ; true"):
        r = envbuild("render", "cpu-reference", "--target", "local", "--format", "ci", "-o", "out",
                     "--envbuild-source", spec, cwd=tmp_path)
        assert r.returncode == 2 and "does not pin envbuild" in r.stderr, (spec, r.stderr)
        assert not (tmp_path / "out").exists()
    wheel = "https://example.org/w/envbuild-0.1.0-py3-none-any.whl#sha256=" + "a" * 64
    assert envbuild("render", "cpu-reference", "--target", "local", "--format", "ci", "-o", "out",
                    "--envbuild-source", wheel, cwd=tmp_path).returncode == 0
    text = next((tmp_path / "out").rglob("*.yml")).read_text()
    assert f"python -m pip install 'envbuild @ {wheel}'" in text and "envbuild==" not in text


@pytest.mark.integration
@pytest.mark.slow
def test_the_workflows_install_and_render_steps_run_in_a_fresh_repository(tmp_path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no commit to install envbuild from")
    src = tmp_path / "envbuild-src"
    git("clone", "-q", ROOT, src)
    sha = git("rev-parse", "HEAD", cwd=src)
    spec = f"git+file://{src}@{sha}"
    repo = tmp_path / "repo"
    git("init", "-q", repo)
    r = envbuild("render", "cpu-reference", "--target", "local", "--format", "ci", "-o", ".",
                 "--envbuild-source", spec, cwd=repo)
    assert r.returncode == 0, r.stderr
    wf = yaml.safe_load((repo / ".github/workflows/envbuild-cpu-reference-local.yml").read_text())
    steps = wf["jobs"]["image"]["steps"]
    upto = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("docker/setup-buildx-action@"))
    runs = [s["run"] for s in steps[:upto] if "run" in s]
    assert runs[0] == f"python -m pip install 'envbuild @ {spec}'"
    assert runs[1].startswith("envbuild render cpu-reference --target local --format dockerfile -o build/context")

    # what actions/setup-python gives the job: a Python of its own on PATH, with a current pip (an
    # old one, 23.2, cannot read a git+file:/// requirement; git+https it reads)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--upgrade-deps", venv], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "ENVBUILD_LOCKDIR")}
    env.update(PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", ENVBUILD_HOME=str(tmp_path / "home"))
    for run in runs:
        p = subprocess.run(["bash", "-e", "-c", run], cwd=repo, env=env, capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, f"{run}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    # envbuild is that commit, installed in the venv (not this checkout, not an index's release)
    probe = ("import envbuild, importlib.metadata as m, json; "
             "print(json.dumps([envbuild.__file__, json.loads(m.distribution('envbuild').read_text('direct_url.json'))]))")
    where, direct = json.loads(subprocess.run([venv / "bin" / "python", "-c", probe], cwd=tmp_path, env=env,
                                              capture_output=True, text=True, check=True).stdout)
    assert Path(where).is_relative_to(venv), where
    assert direct["url"] == f"file://{src}" and direct["vcs_info"] == {**direct["vcs_info"], "vcs": "git",
                                                                      "commit_id": sha}
    context = repo / "build" / "context"
    assert (context / "Dockerfile").is_file() and (context / "envbuild.lock").is_file()
    assert "FROM python:3.11-slim-bookworm" in (context / "Dockerfile").read_text()
