"""What the shipped recipes' deviations say envbuild does, checked on the plans, the actions and
the committed locks (each deviation names its test here or elsewhere: tests/recipes/test_deviations.py
checks that the names hold)."""

from __future__ import annotations

import subprocess

import pytest

from envbuild.actions.steps import actions
from envbuild.facts.profile import from_target
from envbuild.lock import read_lock
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.ib_inventory import profile_facts
from support.paths import ROOT

LOCKS = ROOT / "lockfiles"


def _plan(recipe: str, target: str, **opts):
    rec, tgt = load_recipe(recipe), load_target(target)
    return build_plan(rec, tgt, profile_facts(tgt), None, PlanOptions(prefix="/e", **opts))


def _step(plan, sid: str):
    return next(s for s in plan.steps if s.id == sid)


def _native(plan):
    smoke = _step(plan, "smoke").params
    return next(r for r in smoke.runs if r.name == "native")


def test_alpa_megatron_goes_on_sys_path_and_its_deleted_requirements_are_pinned() -> None:
    plan = _plan("alpa-megatron", "azure-nd96")
    install = _step(plan, "install:megatron")
    assert install.params.mode == "pth" and install.params.dest == "/e/src/megatron"
    code = actions(install, "/e")[0].argv
    assert code[-2:] == ["megatron", "/e/src/megatron"] and ".pth" in code[2]
    reqs = [r.requirement for r in _step(plan, "pip:packages").params.requirements]
    for pin in ("pybind11==2.8.1", "six==1.16.0", "regex==2021.11.10", "numpy==1.21.4"):
        assert pin in reqs


def test_alpa_torch_1_8_2_comes_from_the_lts_find_links() -> None:
    torch = _step(_plan("alpa-megatron", "azure-nd96"), "pip:torch").params
    assert [r.requirement for r in torch.requirements] == ["torch==1.8.2+cu111"]
    assert "https://download.pytorch.org/whl/lts/1.8/torch_lts.html" in torch.find_links


def test_alpa_torch_dependencies_are_pinned_beside_it() -> None:
    """torch comes --no-deps from an index the lock cannot read: the package its import needs
    (typing_extensions) is a locked, hash-checked recipe package of every target's plan."""
    for target in load_recipe("alpa-megatron").targets:
        lock = read_lock(LOCKS / "alpa-megatron" / f"{target}.lock")
        tgt = load_target(target)
        plan = build_plan(load_recipe("alpa-megatron"), tgt, profile_facts(tgt), lock, PlanOptions(prefix="/e"))
        assert _step(plan, "pip:torch").params.no_deps
        reqs = {r.name: r for s in plan.pip_installs() for r in s.params.requirements}
        assert reqs["typing-extensions"].requirement == "typing-extensions==3.10.0.2"
        assert reqs["typing-extensions"].hashes == [lock.package("typing-extensions").dist.sha256]


def test_polaris_mpi4py_is_the_modules_own() -> None:
    """ezpz's mpi4py is the module's Cray MPICH build: locked as preinstalled, never installed."""
    lock = read_lock(LOCKS / "polaris-megatron-deepspeed" / "polaris.lock")
    assert lock.package("mpi4py").source == "preinstalled"
    assert lock.package("mpi4py").provided_by == "module conda/2023-10-04"
    tgt = load_target("polaris")
    plan = build_plan(load_recipe("polaris-megatron-deepspeed"), tgt, profile_facts(tgt), lock,
                      PlanOptions(prefix="/e"))
    names = {r.name for s in plan.pip_installs() for r in s.params.requirements}
    assert "ezpz" not in names and "mpi4py" not in names and "einops" in names


def test_apex_is_pinned_built_by_setup_py_with_its_flags_under_an_old_pip() -> None:
    plan = _plan("alpa-megatron", "azure-nd96")
    assert _step(plan, "git:apex").params.sha == "e2083df5eb96643c61613b9df48dd4eea6b07690"
    tooling = [r.requirement for r in _step(plan, "pip-tooling").params.requirements]
    assert any(t.startswith("pip==23.0") for t in tooling) and "setuptools==59.5.0" in tooling
    argv = _step(plan, "apex:apex").params.argv
    assert argv[1:4] == ["setup.py", "--cpp_ext", "--cuda_ext"]


def test_opt_benchmark_names_nodes_and_gpus_never_trials_with_a_local_checkpoints_dir() -> None:
    plan = _plan("opt-175b-azure", "azure-nd96")
    run = _native(plan)
    words = run.argv[-1].split()
    assert words[words.index("--num-nodes") + 1] == "1" and words[words.index("--num-gpus") + 1] == "8"
    assert "-t" not in words and "--num-trials" not in words
    assert words[words.index("--checkpoints-dir") + 1] == "./checkpoints"
    assert run.cwd == "/e/src/metaseq"  # so ./checkpoints is inside the pinned metaseq tree


def test_opt_sources_are_installed_from_their_pinned_checkouts() -> None:
    plan = _plan("opt-175b-azure", "azure-nd96")
    assert _step(plan, "install:megatron").params.mode == "editable"
    assert _step(plan, "install:metaseq").params.mode == "editable"
    assert _step(plan, "install:fairscale").params.mode == "wheel"  # non-editable, as the guide says
    argv = actions(_step(plan, "install:megatron"), "/e")[0].argv
    assert argv[-2:] == ["-e", "/e/src/megatron"]  # a path, unlike install-opt175.sh's bare -e
    assert not any("nccl" in s.id.lower() for s in plan.steps)  # torch's bundled NCCL


@pytest.mark.parametrize("target", ["azure-nd96", "local"])
def test_opt_locks_pin_numpy_below_2(target) -> None:
    lock = read_lock(LOCKS / "opt-175b-azure" / f"{target}.lock")
    assert int(lock.package("numpy").version.split(".")[0]) < 2


@pytest.mark.parametrize("target", ["azure-nd96", "local"])
def test_opt_locks_keep_numpys_float_alias_for_metaseq(target) -> None:
    """metaseq@5ca60055 uses np.float, which NumPy 1.24 removed: both locks resolve below it."""
    from packaging.version import Version

    lock = read_lock(LOCKS / "opt-175b-azure" / f"{target}.lock")
    numpy = lock.package("numpy")
    assert Version(numpy.version) < Version("1.24") and numpy.verified
    assert load_recipe("opt-175b-azure").package("numpy").version == "<1.24"


def test_polaris_flash_attn_is_built_without_isolation_against_the_module_torch() -> None:
    step = _step(_plan("polaris-megatron-deepspeed", "polaris"), "pip:packages")
    assert step.params.no_build_isolation == ["flash-attn"]
    assert step.params.env["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"
    runs = [a.argv for a in actions(step, "/e") if a.op == "run"]
    assert any("--no-build-isolation" in argv for argv in runs)


def test_polaris_benchmark_runs_from_the_checkout_root() -> None:
    run = _native(_plan("polaris-megatron-deepspeed", "polaris"))
    assert run.cwd == "/e/src/megatron-deepspeed"
    assert "\n  . ./ALCF/train-gpt3.sh\n" in run.argv[-1]  # sourced there, its job awaited (envbuild.plan.capture)


def test_megatronapp_image_is_the_canonical_ngc_name() -> None:
    from envbuild.plan.placeholders import inventory_values
    from envbuild.plan.image import image_plan

    rec, tgt = load_recipe("megatronapp"), load_target("rtx4090-pod")
    ip = image_plan(rec, tgt, None, inventory=inventory_values([profile_facts(tgt)]))
    assert ip.base.image == "nvcr.io/nvidia/pytorch:23.04-py3"


def test_megatronapp_lock_keeps_the_image_packages_and_pins_the_rest() -> None:
    lock = read_lock(LOCKS / "megatronapp" / "rtx4090-pod.lock")
    for name in ("torch", "torchvision", "transformer-engine", "apex"):
        assert lock.package(name).source == "preinstalled"
    for name, version in (("nltk", "3.9.1"), ("regex", "2024.11.6"), ("openpyxl", "3.1.5")):
        pkg = lock.package(name)
        assert pkg.version == version and pkg.verified and pkg.dist.sha256


@pytest.mark.parametrize("present", [False, True])
def test_megatronapp_ib_symlinks_need_the_images_versioned_library(tmp_path, present) -> None:
    """The recipe's link commands, run as the build step runs them (bash -ec) in a stand-in
    for /usr/lib/x86_64-linux-gnu: they fail when the image's versioned library is absent."""
    cmd = load_recipe("megatronapp").source("megatronapp").build[0]
    assert cmd.startswith("cd /usr/lib/x86_64-linux-gnu && test -e libibverbs.so.1.14.36.0 && ln -sf")
    if present:
        (tmp_path / "libibverbs.so.1.14.36.0").write_text("")
    proc = subprocess.run(["bash", "-ec", cmd.replace("/usr/lib/x86_64-linux-gnu", str(tmp_path))],
                          capture_output=True)
    assert (proc.returncode == 0) == present
    assert (tmp_path / "libibverbs.so").is_symlink() == present


def test_mds_lock_pins_deepspeed_and_the_contemporary_megatron_deepspeed() -> None:
    lock = read_lock(LOCKS / "megatron-deepspeed-slurm" / "slurm.lock")
    ds = lock.package("deepspeed")
    assert ds.version == "0.6.3" and ds.verified
    pin = lock.git_pin("megatron-deepspeed")
    assert pin.sha == "87476ced43628b623777545ec4db754c4d3274ca" and pin.verified
    plan = build_plan(load_recipe("megatron-deepspeed-slurm"), load_target("slurm"),
                      from_target(load_target("slurm")), lock, PlanOptions(prefix="/e", backend="venv"))
    assert _step(plan, "git:megatron-deepspeed").params.sha == pin.sha


def test_mds_installs_nltk_before_its_data_preparation() -> None:
    """tools/preprocess_data.py uses nltk at import: the lock pins 3.7 with its hash, and nltk is
    installed before the build step runs the script, on a plain node and in the image (where
    the pip step is a layer and the build runs from prepare.sh when a container starts)."""
    from envbuild.plan.image import image_plan, run_time_steps

    lock = read_lock(LOCKS / "megatron-deepspeed-slurm" / "slurm.lock")
    nltk = lock.package("nltk")
    assert nltk.version == "3.7" and nltk.verified and len(nltk.dist.sha256) == 64
    assert "recipe" in nltk.required_by
    recipe, target = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
    venv = build_plan(recipe, target, from_target(target), lock, PlanOptions(prefix="/e", backend="venv"))
    image = image_plan(recipe, target, lock).plan
    for plan in (venv, image):
        ids = [s.id for s in plan.steps]
        build = ids.index("build:megatron-deepspeed")
        assert "tools/preprocess_data.py" in _step(plan, "build:megatron-deepspeed").params.commands[0]
        installs = [ids.index(s.id) for s in plan.pip_installs()
                    if any(r.name == "nltk" and r.version == "3.7" for r in s.params.requirements)]
        assert installs and installs[0] < build
    later = {s.id for s in run_time_steps(image)}
    assert "build:megatron-deepspeed" in later
    assert not later & {s.id for s in image.pip_installs()}


def test_megatronapp_two_pods_write_the_master_address_before_their_scripts() -> None:
    import yaml

    from support.launchcases import render

    MEGATRONAPP_MASTER_ADDR = load_recipe("megatronapp").run_of("two-pods").pod_setup
    assert "MASTER_ADDR=$ENVBUILD_MASTER_ADDR" in MEGATRONAPP_MASTER_ADDR

    _, job = yaml.safe_load_all(render("megatronapp--rtx4090-pod--k8s-two-pods").text)
    cmd = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    for script in ("run_master.sh", "run_worker.sh"):  # one branch per node rank
        line = next(x for x in cmd.splitlines() if x.rstrip().endswith(script))
        assert MEGATRONAPP_MASTER_ADDR in line and line.index(MEGATRONAPP_MASTER_ADDR) < line.index(script)
