"""The container backend's node plan, as data: steps, engine commands, digests, effects, preflight.

The real build of the cpu-reference image through the playbook is in
tests/provision/test_provision_container.py. Here, without building anything:

- megatron-deepspeed-slurm on its Slurm (pyxis) target and megatronapp on its Kubernetes pod:
  the node plan builds the recipe's NGC-based image with the node's engine, imports it with
  enroot only where pyxis runs the job (into the .sqsh name `envbuild launch` passes to
  ``srun --container-image``), runs the verify script and the smoke runs in throwaway
  containers without network, with the node's GPUs.
- Preflight says when enroot (pyxis) or a build engine is missing: on profile facts, and on
  this machine's live facts through ``envbuild provision`` (refused, exit 1, nothing built).

Not exercised, and why: the NGC bases (nvcr.io/nvidia/pytorch:22.02-py3 and 23.04-py3) cannot
be pulled here (no registry), so those images are never built, nor imported with enroot (not
installable here), nor run with GPUs (none here): the plans are checked as data only.
"""

from __future__ import annotations

import json
import shutil

import pytest

from envbuild.actions.assets import asset_path
from envbuild.actions.effects import effects
from envbuild.render.steps import step_actions as actions
from envbuild.plan.params import CONTEXT_LABEL
from envbuild.inputs import find_lock
from envbuild.plan.build import PlanOptions
from envbuild.plan.model import Plan
from envbuild.plan.resolve import check_facts, default_backend, resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.containerplan import engine_facts, engine_plan

BASE = "localhost/envbuild-base:bookworm"


def _context(step) -> tuple[dict[str, str], dict[str, str]]:
    """The build context the image step writes on the node: (generated files by relative path,
    envbuild's own files by relative path -> asset name)."""
    ctx = step.params.context_dir.rstrip("/") + "/"
    acts = actions(step, "/unused")
    return ({a.path.removeprefix(ctx): a.content for a in acts if a.op == "write"},
            {a.dest.removeprefix(ctx): a.asset for a in acts if a.op == "copy"})


def _runs(step) -> list[list[str]]:
    return [a.argv for a in actions(step, "/unused") if a.op in ("run", "capture")]


def test_container_recipes_default_to_the_container_backend() -> None:
    assert default_backend(load_recipe("megatron-deepspeed-slurm"), None) == "container"
    assert default_backend(load_recipe("megatronapp"), None) == "container"
    assert default_backend(load_recipe("cpu-reference"), None) is None
    assert default_backend(load_recipe("megatronapp"), "venv") == "venv"


def test_megatron_deepspeed_slurm_builds_imports_and_checks_in_the_image() -> None:
    rec, tgt, res = engine_plan("megatron-deepspeed-slurm", "slurm", {"podman": "4.9.3", "enroot": "3.5.0"})
    plan = res.plan
    assert res.feasible, res.verdict.violations
    assert plan.backend == "container" and plan.prefix == "/home/u/.envbuild/envs/megatron-deepspeed-slurm"
    assert [(s.id, s.kind) for s in plan.steps] == [
        ("preflight", "preflight"), ("image", "image"), ("image-import", "image_import"),
        ("import-check", "image_check"), ("smoke", "image_smoke")]

    image = plan.step("image").params
    assert image.engine.name == "podman" and image.base == "nvcr.io/nvidia/pytorch:22.02-py3"
    assert image.tag == "localhost/envbuild/megatron-deepspeed-slurm:slurm"
    files, assets = _context(plan.step("image"))
    assert "FROM nvcr.io/nvidia/pytorch:22.02-py3" in files["Dockerfile"]
    assert "deepspeed==0.6.3" in "".join(files.values())
    # the step carries the image's plan, typed (not its rendered text), and the context written
    # on the node is the one `envbuild render --format dockerfile` writes from the same plan
    from envbuild.lock.serialize import image_lock_text
    from envbuild.plan.image import image_plan
    from envbuild.render import dockerfile as df

    lock = find_lock(rec, tgt)
    ip = image_plan(rec, tgt, lock, lock_text=image_lock_text(lock, rec.name, tgt.name))
    assert image.image.plan.steps == ip.plan.steps and image.image.base == ip.base
    rendered = df.render(image.image)
    assert rendered.files == files and {rel: str(p) for rel, p in rendered.copies.items()} == {
        rel: str(asset_path(a)) for rel, a in assets.items()}
    assert "Dockerfile" not in image.model_dump_json()  # no rendered text in the plan
    assert image.labels[CONTEXT_LABEL] == image.context_sha256 and "io.envbuild.plan.sha256" in image.labels
    assert image.prefix == "/opt/envbuild/megatron-deepspeed-slurm"
    assert set(image.sources) == {"slurm-scripts", "megatron-deepspeed"}

    build = _runs(plan.step("image"))[-1]
    assert build[:4] == ["podman", "build", "--format", "docker"]
    assert ["--label", f"{CONTEXT_LABEL}={image.context_sha256}"] == build[4:6]
    assert build[-3:] == ["-f", f"{image.context_dir}/Dockerfile", image.context_dir]

    # enroot import into the .sqsh name envbuild launch passes to srun --container-image
    from envbuild.launch.job import default_image

    imp = plan.step("image-import").params
    assert imp.path == default_image(rec.name, tgt.name, "slurm", plan.prefix) and imp.path.startswith(plan.prefix + "/")
    assert imp.path.endswith("/envbuild-megatron-deepspeed-slurm-slurm.sqsh")
    assert ["enroot", "import", "-o", imp.path + ".partial", f"podman://{image.tag}"] in _runs(plan.step("image-import"))
    assert ["mv", "-f", imp.path + ".partial", imp.path] in _runs(plan.step("image-import"))

    check = _runs(plan.step("import-check"))
    assert check == [["podman", "run", "--rm", "--network=none", "--device", "nvidia.com/gpu=all", image.tag,
                      "sh", "/opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/verify.sh"]]
    smoke = plan.step("smoke").params
    assert [r.name for r in smoke.runs] == ["gpt", "collective", "apex"][:len(smoke.runs)]
    assert "native" not in [r.name for r in smoke.runs] and "slurm job" in smoke.native_skip
    for argv in _runs(plan.step("smoke")):
        assert argv[:4] == ["podman", "run", "--rm", "--network=none"] and "--device" in argv
        assert f"{smoke.dir}:{smoke.image_dir}" in argv
        assert argv[argv.index(image.tag) + 1] == "/opt/envbuild/megatron-deepspeed-slurm/bin/python"

    eff = effects(plan)
    assert eff["image"].check == "image" and eff["image"].labels == image.labels
    assert eff["image-import"].check == "exists" and eff["image-import"].path == imp.path
    assert eff["import-check"] is None and eff["smoke"] is None
    # the plan reads back typed (plan.json of a run)
    assert Plan.model_validate_json(plan.to_json()) == plan


def test_docker_engine_imports_from_the_daemon() -> None:
    _, _, res = engine_plan("megatron-deepspeed-slurm", "slurm", {"docker": "28.2.2", "enroot": "3.5.0"})
    image = res.plan.step("image").params
    assert image.engine.name == "docker"
    build = [a for a in actions(res.plan.step("image"), "/x") if a.op == "run"][-1]
    assert build.argv[:2] == ["docker", "build"] and build.env["DOCKER_BUILDKIT"] == "1"
    assert any(a[-1] == f"dockerd://{image.tag}" for a in _runs(res.plan.step("image-import")))
    assert ["--gpus", "all"] == _runs(res.plan.step("import-check"))[0][4:6]


def test_megatronapp_on_kubernetes_is_not_imported_with_enroot() -> None:
    _, _, res = engine_plan("megatronapp", "rtx4090-pod", {"podman": "4.9.3"})
    kinds = [s.kind for s in res.plan.steps]
    assert kinds == ["preflight", "image", "image_check", "image_smoke"]
    assert res.plan.step("image").params.image.base.image == "nvcr.io/nvidia/pytorch:23.04-py3"
    assert "FROM nvcr.io/nvidia/pytorch:23.04-py3" in _context(res.plan.step("image"))[0]["Dockerfile"]


def test_missing_enroot_and_missing_engine_are_refused_by_preflight() -> None:
    rec, tgt = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
    _, v = check_facts(rec, tgt, engine_facts(tgt, {"podman": "4.9.3"}), backend="container")
    assert not v.feasible and [x.rule for x in v.errors] == ["enroot-missing-for-pyxis"]
    assert "has no enroot" in v.errors[0].message and "srun --container-image" in v.errors[0].message
    _, v = check_facts(rec, tgt, engine_facts(tgt, {"enroot": "3.5.0"}), backend="container")
    assert [x.rule for x in v.errors] == ["image-engine-missing"] and "found: enroot" in v.errors[0].message
    # the profile alone (enroot+pyxis, no build engine named): planned, but refused
    _, _, res = engine_plan("megatron-deepspeed-slurm", "slurm", {"enroot+pyxis": "profile"})
    pre = res.plan.step("preflight").params
    assert not pre.feasible and pre.errors == ["image-engine-missing"]
    assert res.plan.step("image").params.engine.name == "docker"
    # without the container backend (launch --no-container) the rows do not apply
    _, v = check_facts(rec, tgt, engine_facts(tgt, {}))
    assert "enroot-missing-for-pyxis" not in v.passed and "image-engine-missing" not in v.passed


def test_a_changed_lock_changes_the_image_step_and_its_label(tmp_path) -> None:
    tgt = load_target("local")
    facts = engine_facts(tgt, {"podman": "4.3.1"})
    opts = PlanOptions(backend="container", base=BASE, wheelhouse="/opt/wheels", host="n1",
                       engine_args=("--isolation=chroot",), engine_env={"TMPDIR": "/t"})
    rec = load_recipe("cpu-reference")
    one = resolve(rec, tgt, facts, find_lock(rec, tgt), opts).plan
    again = resolve(rec, tgt, facts, find_lock(rec, tgt), opts).plan
    assert one == again  # pure and stable
    from envbuild.lock.check import check_lock_file
    from envbuild.testbed.relock import with_version

    rec_path, lock_path = with_version(tmp_path, "cpu-reference", "local", "tqdm", "4.67.1", "ab" * 32)
    rec2 = load_recipe(str(rec_path))
    two = resolve(rec2, tgt, facts, check_lock_file(lock_path, rec2, tgt), opts).plan
    a, b = one.step("image"), two.step("image")
    assert a.digest != b.digest and a.params.context_sha256 != b.params.context_sha256
    assert effects(one)["image"].labels != effects(two)["image"].labels
    (fa, assets), (fb, _) = _context(a), _context(b)
    changed = sorted(k for k in fa if fa[k] != fb.get(k))
    assert "files/opt/envbuild/cpu-reference/.envbuild/requirements/pip-packages.txt" in changed
    assert "tqdm==4.67.1" in fb["files/opt/envbuild/cpu-reference/.envbuild/requirements/pip-packages.txt"]
    # the wheel comes from the node's wheelhouse into the context, named with its locked hash
    assert a.params.wheelhouse == "/opt/wheels" and list(a.params.wheels) == [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert len(next(iter(a.params.wheels.values()))) == 64
    assert "RUN --mount=type=bind,source=wheelhouse" in fa["Dockerfile"]
    # engine options are data: in the build command and the effect check's environment
    build = [x for x in actions(a, one.prefix) if x.op == "run"][-1]
    assert "--isolation=chroot" in build.argv and build.env == {"TMPDIR": "/t"}
    assert effects(one)["image"].env == {"TMPDIR": "/t"}
    # envbuild's own files in the context: by asset name; the digest covers the code that
    # renders the context and the files it copies (envbuild.plan.image.code_digest)
    assert assets["envbuild/verify_image.py"] == "node/verify_image.py"
    assert assets["envbuild/assets/smoke/gpt.py"] == "smoke/gpt.py"


@pytest.mark.integration
def test_provision_refuses_a_pyxis_node_without_enroot(tmp_path, monkeypatch) -> None:
    """This machine's live facts on a target whose jobs run through pyxis: preflight names the
    missing enroot and nothing is built."""
    if shutil.which("enroot"):
        pytest.skip("enroot is installed here")
    if not (shutil.which("podman") or shutil.which("docker")):
        pytest.skip("no podman or docker here")
    from envbuild.cli import main

    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    target = tmp_path / "pyxis-local.yaml"
    target.write_text("schema: 1\nname: pyxis-local\ntitle: this machine as a Slurm node with pyxis\n"
                      "from_facts: true\nscheduler: slurm\ncontainer_runtime: enroot+pyxis\n")
    rc = main(["provision", "--target", str(target), "--backend", "container", "--base", BASE,
               "--prefix", str(tmp_path / "env"), "--json"])
    assert rc == 1
    node = next((tmp_path / "home" / "runs").glob("*/nodes/local"))
    pre = json.loads((node / "preflight.json").read_text())
    assert not pre["feasible"] and [v["rule"] for v in pre["violations"] if v["severity"] == "error"] == [
        "enroot-missing-for-pyxis"]
    result = json.loads((node / "result.json").read_text())
    assert result["status"] == "refused" and result["failed_step"] == "preflight"
    assert not (tmp_path / "env").exists()


@pytest.mark.integration
def test_plan_json_is_the_container_plan_provision_runs(tmp_path, monkeypatch, capsys) -> None:
    """`envbuild plan --backend container` prints the plan a dry-run provision writes and would
    run (same steps and digests in the Ansible inventory), engine options included."""
    import yaml

    from envbuild.cli import main
    from envbuild.render.ansible import steps_of

    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    prefix = str(tmp_path / "env")
    common = ["--backend", "container", "--base", BASE, "--wheelhouse", "/opt/wheels", "--prefix", prefix,
              "--engine-arg=--isolation=chroot", "--engine-env", "TMPDIR=/var/tmp/x"]
    assert main(["provision", "--target", "local", "--dry-run", "--json", *common]) in (0, 1)
    node = next((tmp_path / "home" / "runs").glob("*/nodes/local"))
    ran = Plan.model_validate_json((node / "plan.json").read_text())
    inventory = yaml.safe_load((node.parents[1] / "ansible" / "inventory" / "hosts.yml").read_text()
                               .replace("!unsafe ", ""))
    executed = steps_of(inventory["all"]["hosts"]["local"])
    capsys.readouterr()
    assert main(["plan", "cpu-reference", "--target", "local", "--facts", str(node / "facts.json"),
                 "--json", *common]) == 0
    printed = Plan.model_validate(json.loads(capsys.readouterr().out))
    assert printed == ran and printed.backend == "container"
    assert [(s.id, s.digest) for s in printed.steps] == [(s["id"], s["digest"]) for s in executed]
    assert executed[1]["effect"]["check"] == "image" and executed[1]["effect"]["env"] == {"TMPDIR": "/var/tmp/x"}


def test_the_context_digest_follows_the_code_that_renders_it(tmp_path, monkeypatch) -> None:
    """The image step carries the image plan, not its rendered context: the context digest
    (the image's label, what rebuilds it) covers envbuild's rendering code and the files a
    context copies (plan.image.code_digest), so a changed renderer rebuilds the image."""
    from envbuild.plan import image as I

    pkg = tmp_path / "envbuild"
    shutil.copytree(I.PACKAGE / "render", pkg / "render", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(I, "PACKAGE", pkg)
    monkeypatch.setattr(I, "IMAGE_CODE", (pkg / "render",))
    I.code_digest.cache_clear()
    try:
        before = I.code_digest()
        shell = pkg / "render" / "shell.py"
        shell.write_text(shell.read_text() + "\n# a change\n")
        I.code_digest.cache_clear()
        assert I.code_digest() != before
        ip = I.image_plan(load_recipe("cpu-reference"), load_target("local"), None)
        changed = I.context_digest(ip, {})
        shell.write_text(shell.read_text() + "# another\n")
        I.code_digest.cache_clear()
        assert I.context_digest(ip, {}) != changed
    finally:
        I.code_digest.cache_clear()


def test_a_container_node_is_entered_through_its_image() -> None:
    """After the provision, the line that enters the environment (envbuild.plan.enter): pyxis's
    squashfs where the plan imports the image for Slurm, else a shell in the node's image."""
    from envbuild.plan.enter import enter_command

    _, _, slurm = engine_plan("megatron-deepspeed-slurm", "slurm", {"podman": "4.9.3", "enroot": "3.5.0"})
    assert enter_command(slurm.plan) == (
        "srun --container-image=/home/u/.envbuild/envs/megatron-deepspeed-slurm/"
        "envbuild-megatron-deepspeed-slurm-slurm.sqsh --pty bash")
    _, _, pod = engine_plan("megatronapp", "rtx4090-pod", {"docker": "26.1.0"})
    assert pod.plan.image_import() is None
    assert enter_command(pod.plan) == "docker run --rm -it localhost/envbuild/megatronapp:rtx4090-pod bash"
