"""``envbuild launch --git-mirror``: the plan the launch reads is resolved as ``envbuild plan``
and ``provision`` resolve it, the lock's git pins included, so the git dependencies of source
installs (polaris: ezpz's ambivalent and enrich, pinned in the shipped lock) are fetched from
the mirror too. The mirror is made by the test: one bare repository per git URL of the plan."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.flows.launch import launch_plan
from envbuild.lock import lock_path, read_lock
from envbuild.plan.model import Plan
from envbuild.recipes import load_recipe
from envbuild.targets import load_target

pytestmark = pytest.mark.integration

RECIPE, TARGET = "polaris-megatron-deepspeed", "polaris"


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path: Path) -> dict[str, Path]:
    """mirror/OWNER+NAME/repo (the fetch tool's layout) for every git URL of the recipe and of
    its lock's git pins; returns {url: the repository}."""
    lock = read_lock(lock_path(RECIPE, TARGET))
    urls = sorted({s.url for s in load_recipe(RECIPE).sources} | {g.url for g in lock.git})
    out = {}
    for url in urls:
        owner, name = url.rstrip("/").split("/")[-2:]
        work = tmp_path / "work" / name
        work.mkdir(parents=True)
        _git("init", "-q", "-b", "main", cwd=work)
        (work / "README").write_text(f"{name}\n")
        _git("add", ".", cwd=work)
        _git("commit", "-qm", name, cwd=work)
        out[url] = tmp_path / "mirror" / f"{owner}+{name}" / "repo"
        _git("clone", "-q", "--bare", str(work), str(out[url]), cwd=tmp_path)
    return out


def test_launch_plan_takes_the_git_dependencies_from_the_mirror(mirror, capsys) -> None:
    lock = read_lock(lock_path(RECIPE, TARGET))
    deps = [g for g in lock.git if g.required_by]
    assert deps, "the shipped polaris lock pins ezpz's git dependencies"
    root = str(next(iter(mirror.values())).parents[1])
    plan = launch_plan(load_recipe(RECIPE), load_target(TARGET), run_dir=None, facts_file=None, lock_file=None,
                 prefix=None, git_mirror=root, container=True)
    git = {s.params.name: s.params for s in plan.sources()}
    for pin in deps:  # a git dependency of a source install, as provision fetches it
        assert git[pin.name].sha == pin.sha
        assert git[pin.name].fetch_url == str(mirror[pin.url])
    for name, p in git.items():  # and every source of the recipe
        assert p.fetch_url == str(mirror[p.url]), name
    # the same git steps as `envbuild plan` prints for the same inputs
    assert main(["plan", RECIPE, "-t", TARGET, "--git-mirror", root, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    sources = {s.id for s in Plan.model_validate(printed).sources()}
    want = {s["params"]["name"]: s["params"] for s in printed["steps"] if s["id"] in sources}
    assert {n: p.model_dump(mode="json") for n, p in git.items()} == want
    # the command itself renders with the mirror
    assert main(["launch", RECIPE, "-t", TARGET, "--scheduler", "pbs", "--account", "p", "--partition", "debug",
                 "--git-mirror", root,
                 "-o", str(Path(root).parent / "job.pbs")]) == 0
