"""Which installer a node gets (envbuild.plan.installer), the uv binary as a controller fact
(envbuild.facts.uvbin), and the actions of a uv step (envbuild.actions.steps). Pure."""

from __future__ import annotations

import pytest

from envbuild.actions.effects import effects
from envbuild.actions.steps import actions
from envbuild.errors import InputError
from envbuild.facts.model import NodeFacts, UvBinary
from envbuild.facts.uvbin import controller_uv, parse_uv
from envbuild.plan import params as P
from envbuild.plan.build import PlanOptions
from envbuild.plan.installer import choose_installer, step_installer
from envbuild.plan.model import Plan, Step
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.clirun import envbuild as run_envbuild

UV = UvBinary(version="0.13.9", sha256="5" * 64, os="linux", arch="x86_64", libc="glibc", glibc_min="2.17")
NODE = NodeFacts(host="n1", arch="x86_64", glibc="2.36")


@pytest.mark.parametrize("facts,backend,python,why", [
    (NODE.model_copy(update={"arch": "aarch64"}), "venv", "3.11", "the node is aarch64"),
    (NODE.model_copy(update={"arch": None}), "venv", "3.11", "architecture is not known"),
    (NODE.model_copy(update={"glibc": "2.12"}), "venv", "3.11", "glibc 2.12 is older than the 2.17"),
    (NODE.model_copy(update={"glibc": None}), "venv", "3.11", "glibc is not known"),
    (NODE, "conda", "3.11", "the conda backend installs with pip"),
    (NODE, "container", "3.11", "the container backend installs with pip"),
    (NODE, "venv", "3.7", "Python 3.8 and later"),
])
def test_auto_keeps_pip_where_uv_cannot_run_and_says_why(facts, backend, python, why):
    installer, reason = choose_installer("auto", UV, facts, backend, python)
    assert installer == "pip" and why in reason
    with pytest.raises(InputError) as err:  # asked for uv there: refused, with the way out
        choose_installer("uv", UV, facts, backend, python)
    assert why in str(err.value) and "--installer auto" in err.value.hint


def test_auto_takes_uv_where_it_runs_and_pip_can_be_forced():
    assert choose_installer("auto", UV, NODE, "venv", "3.11")[0] == "uv"
    assert choose_installer("auto", UV, NODE, "module-venv", "3.8")[0] == "uv"
    musl = UV.model_copy(update={"libc": "musl", "glibc_min": None})
    assert choose_installer("auto", musl, NODE.model_copy(update={"glibc": None}), "venv", "3.11")[0] == "uv"
    assert choose_installer("pip", UV, NODE, "venv", "3.11") == ("pip", "pip: asked for (--installer pip)")
    assert choose_installer("auto", None, NODE, "venv", "3.11")[0] == "pip"
    with pytest.raises(InputError):
        choose_installer("conda", UV, NODE, "venv", "3.11")


def test_pip_variables_keep_pip_and_builds_without_isolation_get_their_own_pip_call():
    assert step_installer("uv", no_build_isolation=[], env={"PIP_CONSTRAINT": "/c"})[0] == "pip"
    installer, note = step_installer("uv", no_build_isolation=["deepspeed"], env={})
    assert installer == "uv" and "deepspeed" in note
    step = Step(id="pip:packages", title="p", params=P.PipInstallParams(
        requirements=[P.Requirement(name="a", version="1", requirement="a==1", hashes=["ab" * 32]),
                      P.Requirement(name="ds", version="2", requirement="ds==2")],
        no_build_isolation=["ds"], installer="uv", uv="/e/.envbuild/tools/uv", find_links=["/w"],
        no_index=True))
    runs = [a for a in actions(step, "/e") if a.op == "run"]
    assert runs[0].argv[:8] == ["/e/.envbuild/tools/uv", "pip", "install", "--no-progress", "--link-mode", "copy",
                                "--python", "/e/bin/python"]
    assert "--require-hashes" in runs[0].argv and runs[0].argv[-2:] == ["--no-index", "--find-links=/w"]
    assert runs[0].repair_args == ["--reinstall", "--no-cache"]
    assert runs[1].argv[:3] == ["/e/bin/python", "-m", "pip"] and "--no-build-isolation" in runs[1].argv
    assert runs[1].repair_args == ["--force-reinstall"]
    assert all(r.log == "/e/.envbuild/logs/pip-packages.log" for r in runs)  # the step's build log


def test_uv_and_pip_steps_read_the_same_requirement_files():
    reqs = [P.Requirement(name="a", version="1", requirement="a==1", hashes=["ab" * 32])]
    pip = Step(id="pip:x", title="p", params=P.PipInstallParams(requirements=reqs, index_url="https://i/simple"))
    uv = Step(id="pip:x", title="p", params=P.PipInstallParams(requirements=reqs, index_url="https://i/simple",
                                                               installer="uv", uv="/t/uv"))
    a, b = actions(pip, "/e"), actions(uv, "/e")
    assert [x for x in a if x.op == "write"] == [x for x in b if x.op == "write"]
    tail = lambda r: r.argv[r.argv.index("-r"):]  # noqa: E731
    assert tail(a[1]) == tail(b[1]) == ["-r", "/e/.envbuild/requirements/pip-x.txt", "--require-hashes",
                                        "--no-deps", "--index-url", "https://i/simple"]
    assert pip.digest != uv.digest  # a change of installer runs the step again
    assert "installer" not in pip.params.model_dump()  # plans made before keep their digests


def test_plan_with_uv_pushes_it_first_and_checks_its_sha256():
    rec, tgt = load_recipe("cpu-reference"), load_target("local")
    facts = NodeFacts(host="n1", arch="x86_64", glibc="2.36",
                      pythons=[{"version": "3.11.2", "path": "/usr/bin/python3.11"}])
    plan = resolve(rec, tgt, facts, None, PlanOptions(prefix="/opt/e", uv=UV)).plan
    ids = [s.id for s in plan.steps]
    assert ids.index("environment") + 1 == ids.index("uv") < ids.index("pip-tooling")
    uv_step = plan.steps[ids.index("uv")]
    assert uv_step.params.dest == "/opt/e/.envbuild/tools/uv"
    acts = actions(uv_step, plan.prefix)
    assert [a.op for a in acts] == ["mkdir", "copy"] and acts[1].asset == "uv/uv" and acts[1].perm == "0755"
    eff = effects(plan)["uv"]
    assert (eff.check, eff.sha256, eff.perm) == ("file", UV.sha256, "0755")
    assert {s.params.installer for s in plan.requirement_installs()} == {"uv"}
    assert next(d for d in plan.decisions if d.subject == "installer").outcome == "uv 0.13.9"
    pip_plan = resolve(rec, tgt, facts, None, PlanOptions(prefix="/opt/e", uv=UV, installer="pip")).plan
    assert "uv" not in [s.id for s in pip_plan.steps]
    assert Plan.model_validate_json(plan.to_json()).to_json() == plan.to_json()


def test_uv_version_output_parses():
    b = parse_uv("uv 0.4.30 (61ed2a236 2024-11-04)", "Tag: py3-none-musllinux_1_1_aarch64\n", "1" * 64)
    assert (b.arch, b.libc, b.glibc_min) == ("aarch64", "musl", None)
    assert parse_uv("uv 0.13.9 (x86_64-unknown-linux-gnu)", None, "1" * 64).glibc_min is None
    assert parse_uv("uv 0.13.9 (aarch64-apple-darwin)", None, "1" * 64) is None
    assert parse_uv("Python 3.11", None, "1" * 64) is None


def test_controller_uv_is_the_binary_uv_finds():
    import hashlib

    path, found = controller_uv()
    if path is None:
        pytest.skip("no uv on this controller")
    assert found is not None and found.sha256 == hashlib.sha256(open(path, "rb").read()).hexdigest()
    from envbuild.actions.assets import asset_path

    assert str(asset_path("uv/uv")) == str(__import__("pathlib").Path(path).resolve())


def test_plan_command_shows_the_installer_decision_and_obeys_installer_pip(tmp_path):
    import json
    import os

    env = {**os.environ, "ENVBUILD_HOME": str(tmp_path)}
    facts = tmp_path / "facts.json"
    from envbuild.facts.load import dump_facts

    facts.write_text(dump_facts([NodeFacts(host="n1", arch="x86_64", glibc="2.36", home="/home/u",
                                           pythons=[{"version": "3.11.2", "path": "/usr/bin/python3.11"}])],
                                as_list=False))

    def plan(*extra):
        p = run_envbuild("plan", "cpu-reference", "--target", "local", "--facts", str(facts), "--json",
                         *extra, env=env)
        assert p.returncode == 0, p.stderr
        data = json.loads(p.stdout)
        return next(d for d in data["decisions"] if d["subject"] == "installer"), [s["id"] for s in data["steps"]]

    decision, ids = plan("--installer", "pip")
    assert decision["outcome"] == "pip" and "uv" not in ids
    path, found = controller_uv()
    if found is None:
        return
    decision, ids = plan()
    assert decision["outcome"] == f"uv {found.version}" and "uv" in ids

