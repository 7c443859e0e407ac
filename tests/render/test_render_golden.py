"""Every shipped recipe x target rendered as a Dockerfile context, an Apptainer definition, a
shell script and a CI workflow equals its committed copy under containers/; the committed
Dockerfiles pass hadolint, the generated shell passes shellcheck, the definitions parse and
the workflows are the expected YAML.

Refresh after a reviewed change: ENVBUILD_UPDATE_GOLDEN=1 python -m pytest tests/render/test_render_golden.py

Apptainer/SingularityCE cannot be installed on this machine (`apt-cache policy apptainer
singularity-container`: no candidate; neither is on PyPI), so the definitions are checked with
envbuild.render.apptainer.parse (sections as Apptainer reads them) and their %post/%test
bodies with shellcheck, not built.
"""

from __future__ import annotations

import json
import os
import re
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
from envbuild.render.ci import CiInputs, EnvbuildSource
from envbuild.render.context import ASSETS
from envbuild.render.formats import render
from envbuild.plan.placeholders import inventory_values
from envbuild.targets import load_target
from support.ib_inventory import profile_facts
from support.paths import ROOT

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


# where the committed workflows install envbuild from: an example source (a documentation domain,
# RFC 2606) pinned at a commit, as containers/README.md says; a user's render names its own
EXAMPLE_SOURCE = EnvbuildSource.parse("git+https://example.org/envbuild.git@" + "0" * 40)


@lru_cache(maxsize=None)
def rendered(recipe: str, target: str, fmt: str) -> dict[str, str]:
    rec, tgt = load_recipe(recipe), load_target(target)
    lock = find_lock(rec, tgt)
    path = lock_path(rec.name, tgt.name, SHIPPED_LOCKDIR)
    res = render(fmt, rec, tgt, lock, lock_text=path.read_text() if lock is not None else None,
                 facts=node_facts(tgt), inventory=inventory_values([node_facts(tgt)]),
                 given=CiInputs(recipe=recipe, source=EXAMPLE_SOURCE) if fmt == "ci" else None)
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
    build = next(s for s in steps if s.get("uses", "").startswith("docker/build-push-action@"))
    assert build["with"]["cache-from"].startswith("type=gha") and build["with"]["load"] is True
    assert any(r.endswith("verify.sh") for r in runs) and any(r.endswith("verify.sh --smoke") for r in runs)
    # every action pinned by a commit, never by a tag; envbuild pinned, never `pip install .`
    assert all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", s["uses"]) for s in steps if "uses" in s)
    assert "pip install ." not in path.read_text()
    install = next(s["run"] for s in steps if s.get("name", "").startswith("Install envbuild"))
    assert install == f"python -m pip install 'envbuild @ {EXAMPLE_SOURCE.spec}'"  # by commit, not by name
    assert True in wf or "on" in wf  # PyYAML reads the key `on` as a boolean


def workflow_linter() -> list[str] | None:
    """actionlint where installed, else action-validator (npm: .ci/node, the workflow JSON schema
    of SchemaStore; actionlint's PyPI package downloads its binary from GitHub, which CI cannot
    reach)."""
    if exe := shutil.which("actionlint"):
        return [exe, "-no-color"]
    local = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "action-validator"
    exe = str(local) if local.exists() else shutil.which("action-validator")
    return [exe] if exe else None


def test_ci_workflows_pass_a_workflow_linter() -> None:
    lint = workflow_linter()
    if lint is None:
        pytest.skip("neither actionlint nor action-validator installed (npm ci --prefix .ci/node)")
    files = sorted(CONTAINERS.glob("*/*/ci/.github/workflows/*.yml"))
    for f in files if lint[0].endswith("action-validator") else [files]:  # action-validator: one file a call
        out = subprocess.run([*lint, *map(str, f if isinstance(f, list) else [f])], capture_output=True, text=True)
        assert out.returncode == 0, (f, out.stdout[-3000:] + out.stderr[-1000:])


@pytest.mark.integration
def test_a_users_repository_gets_a_workflow_that_renders_what_render_did(tmp_path) -> None:
    """Issue 40: a fresh git repository holding only a recipe of one's own and its lock;
    `envbuild render my-recipe.yaml --lock ... --format ci` there names both files as its
    triggers and passes the workflow linter; the workflow's own render step, run in that
    repository, writes the build context `envbuild render ... --format dockerfile` writes."""
    from support.clirun import envbuild

    repo = tmp_path / "repo"
    (repo / "env").mkdir(parents=True)
    data = yaml.safe_load((ROOT / "envbuild/recipes/data/cpu-reference.yaml").read_text())
    data["name"] = "my-stack"
    (repo / "env" / "my-stack.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    lock = envbuild("lock", "env/my-stack.yaml", "--target", "local", "--wheelhouse", "/opt/wheels",
                    "-o", "env/my-stack.lock", cwd=repo)
    assert lock.returncode == 0, lock.stderr
    r = envbuild("render", "env/my-stack.yaml", "--target", "local", "--lock", "env/my-stack.lock",
                 "--format", "ci", "-o", ".", "--envbuild-source", EXAMPLE_SOURCE.spec, cwd=repo)
    assert r.returncode == 0, r.stderr
    wf_path = repo / ".github/workflows/envbuild-my-stack-local.yml"
    wf = yaml.safe_load(wf_path.read_text())
    on = wf.get("on", wf.get(True))
    assert on["push"]["paths"] == ["env/my-stack.yaml", "env/my-stack.lock", ".github/workflows/envbuild-my-stack-local.yml"]
    lint = workflow_linter()
    if lint is not None:
        out = subprocess.run([*lint, str(wf_path)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout[-2000:]
    step = next(s["run"] for s in wf["jobs"]["image"]["steps"] if s.get("name") == "Render the build context")
    assert step == ("envbuild render env/my-stack.yaml --target local --lock env/my-stack.lock --format dockerfile "
                    "-o build/context")
    import shlex

    argv = shlex.split(step)[1:]
    assert envbuild(*argv, cwd=repo).returncode == 0
    assert envbuild("render", "env/my-stack.yaml", "--target", "local", "--lock", "env/my-stack.lock",
                    "--format", "dockerfile", "-o", str(tmp_path / "direct"), cwd=repo).returncode == 0
    ours = {p.relative_to(repo / "build/context"): p.read_bytes() for p in (repo / "build/context").rglob("*") if p.is_file()}
    direct = {p.relative_to(tmp_path / "direct"): p.read_bytes() for p in (tmp_path / "direct").rglob("*") if p.is_file()}
    assert ours == direct and any(str(k) == "Dockerfile" for k in ours)
    # a lock outside the folder (the repository's root) could not be read by the workflow: refused
    shutil.copy(repo / "env" / "my-stack.lock", tmp_path / "elsewhere.lock")
    out = envbuild("render", str(tmp_path / "repo" / "env" / "my-stack.yaml"), "--target", "local", "--lock",
                   str(tmp_path / "elsewhere.lock"), "--format", "ci", "-o", ".", "--envbuild-source",
                   EXAMPLE_SOURCE.spec, cwd=repo / "env")
    assert out.returncode == 2 and "outside this folder" in out.stderr


def test_the_workflows_render_step_quotes_what_it_was_given(tmp_path) -> None:
    """A recipe path, lock and base reach the workflow's bash step as quoted words (a space, a
    `$(...)` and a quote come back exactly, nothing runs); an Actions expression, which the runner
    would evaluate before bash sees it, is refused before anything is written."""
    import shlex

    from envbuild.plan.image import image_plan
    from envbuild.render.ci import workflow
    from support.clirun import envbuild

    rec, tgt = load_recipe("cpu-reference"), load_target("local")
    ip = image_plan(rec, tgt, find_lock(rec, tgt))
    given = CiInputs(recipe="env/my stack $(touch x) 'q'.yaml", lock="env/a b.lock", base="reg.io/img:1@sha256:" + "0" * 64,
                     source=EXAMPLE_SOURCE)
    step = next(s["run"] for s in workflow(ip, given)["jobs"]["image"]["steps"] if s.get("name") == "Render the build context")
    argv = shlex.split(step)
    assert argv[2] == given.recipe and argv[argv.index("--lock") + 1] == given.lock
    assert argv[argv.index("--base") + 1] == given.base
    out = subprocess.run(["bash", "-c", f"set -- {step.removeprefix('envbuild render ')}; printf '%s\\n' \"$@\""],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.splitlines()[0] == given.recipe and not (tmp_path / "x").exists()
    bad = tmp_path / "${{ secrets.TOKEN }}.yaml"
    bad.write_text((ROOT / "envbuild/recipes/data/cpu-reference.yaml").read_text())
    r = envbuild("render", bad.name, "--target", "local", "--format", "ci", "-o", "out", "--envbuild-source",
                 EXAMPLE_SOURCE.spec, cwd=tmp_path)
    assert r.returncode == 2 and "Actions expression" in r.stderr and not (tmp_path / "out").exists()
