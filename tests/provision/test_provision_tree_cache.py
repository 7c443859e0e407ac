"""A source's in-tree build outputs (``build_outputs``) through the real playbook path on this
machine: ``envbuild provision --target local`` builds them with real ninja and gcc and keeps
their archive in the controller's build cache under the planner's key; the same prefix
provisioned again from nothing (the next node of the kind: the key holds the tree's path)
restores them before the build command, whose ninja then has no work to do; a bundle made from
that cache carries the archive (prebuilt), and a provision from it under a fresh ENVBUILD_HOME
restores those bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from envbuild.fsio import sha256_file
from envbuild.report.collect import collect

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("gcc")),
                                 reason="needs ninja and gcc (.ci/apt-packages.txt: ninja-build)")]

NINJA = """\
rule cc
  command = gcc -MMD -MF $out.d -fPIC -c $in -o $out
  depfile = $out.d
  deps = gcc
rule link
  command = gcc -shared $in -o $out
build k.o: cc ../k.c
build libk.so: link k.o
default libk.so
"""


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def mirror(module_tmp):
    """``<mirror>/example/kern.git``: a C kernel, its header and the ninja file of its build folder."""
    base = module_tmp("treemirror")
    work = base / "work"
    (work / "kernels" / "build").mkdir(parents=True)
    (work / "kernels" / "k.h").write_text("#define SCALE 3\n")
    (work / "kernels" / "k.c").write_text('#include "k.h"\nint scale(int x) { return SCALE * x; }\n')
    (work / "kernels" / "build" / "build.ninja").write_text(NINJA)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-qm", "kernels", cwd=work)
    (base / "mirror" / "example").mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(base / "mirror" / "example" / "kern.git"), cwd=base)
    return {"dir": base / "mirror", "sha": git("rev-parse", "HEAD", cwd=work)}


def recipe_yaml(sha: str) -> str:
    return yaml.safe_dump({
        "schema": 1, "name": "tree-cache", "title": "in-tree build outputs",
        "description": "a source whose build writes a folder in its tree", "python": "3.11",
        "targets": ["local"], "published": {"url": "https://example.invalid/tree-cache"},
        "environment": {"kind": "venv"}, "packages": [],
        "sources": [{"name": "kern", "url": "https://github.com/example/kern", "ref": "main", "sha": sha,
                     "install": "none", "build": ["ninja -C kernels/build"],
                     "build_outputs": ["kernels/build"], "why": "a kernel built in its tree"}],
    }, sort_keys=False)


def provision(recipe: Path, prefix: Path, home: Path, *extra: str) -> tuple[int, dict, Path]:
    argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", str(recipe),
            "--prefix", str(prefix), "--no-smoke", "--json", *extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900, env={**os.environ, "ENVBUILD_HOME": str(home)})
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert lines and lines[-1].get("type") == "result", p.stdout[-3000:] + p.stderr[-3000:]
    return p.returncode, lines[-1], Path(lines[-1]["run_dir"])


def node_log(run: Path) -> str:
    return (run / "nodes" / "local" / "log.txt").read_text()


def test_outputs_built_once_restored_on_the_next_node_and_carried_by_a_bundle(mirror, tmp_path):
    recipe = tmp_path / "tree-cache.yaml"
    recipe.write_text(recipe_yaml(mirror["sha"]))
    home, prefix = tmp_path / "home", tmp_path / "env"
    rc, out, run = provision(recipe, prefix, home, "--git-mirror", str(mirror["dir"]))
    assert rc == 5, out  # no smoke: nothing judged (NOT JUDGED, exit 5)
    plan = json.loads((run / "nodes" / "local" / "plan.json").read_text())
    [step] = [s for s in plan["steps"] if s["id"] == "build:kern"]
    key = step["params"]["cache_key"]
    archive = home / "cache" / "wheels" / key / "outputs.tar"
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == sorted([".envbuild-build-started", ".envbuild-mtimes.json", "kernels/build/.ninja_deps",
                                                 "kernels/build/.ninja_log", "kernels/build/build.ninja",
                                                 "kernels/build/k.o", "kernels/build/libk.so"])
    built = (prefix / "src" / "kern" / "kernels" / "build" / "libk.so").read_bytes()

    # the next node of the kind: nothing of the environment, the same path, the controller's cache
    shutil.rmtree(prefix)
    rc, out, run2 = provision(recipe, prefix, home, "--git-mirror", str(mirror["dir"]), "--lock",
                              str(run / "lock.lock"))
    assert rc == 5, out  # no smoke: nothing judged (NOT JUDGED, exit 5)
    assert "saved for the next node" in node_log(run)
    log = node_log(run2)
    assert f"build outputs ({key}): 5 file(s) of kernels/build restored from the build cache" in log, log[-3000:]
    assert "ninja: no work to do." in log and "gcc" not in log and "saved for the next node" not in log
    assert "none of its 5 file(s) changed after the restore" in log
    assert (prefix / "src" / "kern" / "kernels" / "build" / "libk.so").read_bytes() == built

    # carried: a bundle from this cache packs the archive; a controller that never built it restores it
    bundle = tmp_path / "b.tar"
    made = subprocess.run([sys.executable, "-m", "envbuild", "bundle", str(recipe), "--target", "local",
                           "--lock", str(run / "lock.lock"), "--git-mirror", str(mirror["dir"]), "--prefix", str(prefix),
                           "-o", str(bundle)],
                          capture_output=True, text=True, env={**os.environ, "ENVBUILD_HOME": str(home)})
    assert made.returncode == 0, made.stderr[-2000:]
    assert f"{key}: prebuilt archive of build outputs outputs.tar from the build cache" in made.stdout + made.stderr, made.stdout
    fresh = tmp_path / "fresh-home"
    shutil.rmtree(prefix)
    rc, out, run3 = provision(recipe, prefix, fresh, "--bundle", str(bundle),
                              "--bundle-sha256", sha256_file(bundle))  # made from our own lock
    assert rc == 5, out  # no smoke: nothing judged (NOT JUDGED, exit 5)
    assert (fresh / "cache" / "wheels" / key / "outputs.tar").read_bytes() == archive.read_bytes()
    assert "ninja: no work to do." in node_log(run3)
    record = json.loads((run3 / "run.json").read_text())
    assert record["bundle"]["prebuilt"] == [key] and record["bundle"]["prebuilt_seeded"] == [key]
    assert record["bundle"]["prebuilt_not_used"] == []
    assert collect(run3).run.bundle.prebuilt == [key]  # the report: carried, restored, and kept by the build
