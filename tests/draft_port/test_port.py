"""``envbuild port`` end to end on the five published recipes: real git repositories made here,
holding at one commit just the files of each setup that the known fixes look at (with the
patterns the real trees have at their pinned commits, and some that must stay untouched), laid
out as a mirror folder (OWNER+NAME/repo, bare); each published recipe copied with its sources
pinned to those commits; the CLI run in-process. Asserted: the fix rows applied are exactly the
patterns present (never one that is absent, guarded or outside the setup's code), the variant
loads (`envbuild show`), and `envbuild check` finds it FEASIBLE on h100-venv or refuses only
what it left undecided."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from support.clirun import envbuild

from envbuild.facts.profile import from_target
from envbuild.port.stack import choose_stack
from envbuild.port.tables import node_stack
from envbuild.recipes import load_recipe
from envbuild.shipped import RECIPES
from envbuild.targets import load_target
from support.paths import ROOT
from support.portsetups import DEEPSPEED, SETUPS, UNDECIDED, mirror_repo

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    """The mirror folder with every setup's trees; per recipe, its sources' test commits."""
    root = tmp_path_factory.mktemp("port") / "mirror"
    root.mkdir()
    mirror_repo(root, "microsoft/DeepSpeed", DEEPSPEED)
    pins: dict[str, dict[str, str]] = {}
    for recipe, (sources, _) in SETUPS.items():  # a list of trees: later commits of the same branch
        pins[recipe] = {name: mirror_repo(root, slug, [(f, None) for f in (files if isinstance(files, list) else [files])])[0]
                        for name, (slug, files) in sources.items()}
    del pins["opt-175b-azure"]["megatron"]  # the recipe's fa6c0860 stays pinned: a commit the mirror lacks
    return root, pins


def _published(recipe: str, pins: dict[str, str], where: Path) -> Path:
    """The shipped recipe with its sources pinned to the test trees (the rest as shipped)."""
    data = yaml.safe_load((RECIPES / f"{recipe}.yaml").read_text())
    for src in data.get("sources", []):
        if src["name"] in pins:
            src["sha"] = pins[src["name"]]
    path = where / f"{recipe}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _port(recipe: str, mirror, tmp_path: Path, *extra: str) -> tuple[dict, dict, Path]:
    _root, pins = mirror
    src = _published(recipe, pins[recipe], tmp_path)
    out = tmp_path / f"{recipe}-sm90.yaml"
    proc = envbuild("port", str(src), "--target", "h100-venv", *extra, "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), yaml.safe_load(out.read_text()), out


def _check(out: Path) -> tuple[int, set[str]]:
    proc = envbuild("check", str(out), "--target", "h100-venv", "--json")
    verdict = json.loads(proc.stdout)
    return proc.returncode, {v["rule"] for v in verdict["violations"] if v["severity"] == "error"}


@pytest.mark.parametrize("recipe", list(SETUPS))
def test_port_applies_fixes_only_where_the_pattern_is(recipe, mirror, tmp_path) -> None:
    res, variant, out = _port(recipe, mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert {(f["fix"], f["component"], f["file"]) for f in res["fixes"]} == SETUPS[recipe][1]
    assert variant["variant_of"] == recipe and variant["name"] == f"{recipe}-sm90"
    mine = {(q["component"], q["file"]) for q in variant.get("patches", []) if q["id"].split("-")[0] in
            {f.split("-")[0] for f, _, _ in SETUPS[recipe][1]}}
    assert {(c, f) for _, c, f in SETUPS[recipe][1]} <= mine
    # every change is a deviation that names its code and its test, both real
    for d in variant["deviations"]:
        assert d["handled_by"] and d["test"] and d["problem"] and d["instead"] and d["source"]["url"], d["id"]
        for ref in d["handled_by"]:
            module, _, attr = ref.partition(":")
            assert hasattr(importlib.import_module(module), attr), ref
        for test in d["test"]:
            path, _, name = test.partition("::")
            assert f"def {name.split('[')[0]}(" in (ROOT / path).read_text(), test
    for fix, _, _ in SETUPS[recipe][1]:
        assert any(d["id"] == fix for d in variant["deviations"])
    shown = envbuild("show", str(out))
    assert shown.returncode == 0, shown.stderr
    rc, errors = _check(out)
    undecided = variant.get("undecided", [])
    assert {u["field"] for u in undecided} == UNDECIDED[recipe]
    if not undecided:
        assert rc == 0 and not errors
    else:  # check refuses the undecided entries, and rows each names
        named = {u["why"].split(":")[0].removeprefix("check row ") for u in undecided}
        assert rc == 1 and errors - {"recipe-undecided"} <= named


def test_port_uses_the_nodes_own_torch(mirror, tmp_path) -> None:
    _, variant, out = _port("alpa-megatron", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    torch = variant["packages"][0]
    assert (torch["name"], torch["version"], torch["preinstalled"]) == ("torch", "2.11.0", True)
    assert variant["python"] == "3.12"
    assert variant["environment"] == {"kind": "venv", "system_site_packages": True}
    numpy = next(p for p in variant["packages"] if p["name"] == "numpy")
    assert (numpy["version"], numpy["preinstalled"]) == ("2.5.2", True)
    assert _check(out) == (0, set())


def test_port_names_only_the_environment_pins_the_setup_had(mirror, tmp_path) -> None:
    """The environment deviation names the published pip and setuptools pins where the setup had
    them (alpa: pip <23.1 for Apex's --global-option, setuptools 59.5.0 for torch 1.x) and claims
    none for a plain venv (nanoGPT's README), whose problem is that it does not see the node."""
    _, alpa, _ = _port("alpa-megatron", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    env = next(d for d in alpa["deviations"] if d["id"] == "environment")
    assert "pip <23.1, setuptools 59.5.0" in env["problem"]
    assert env["instead"].endswith("(the published pip <23.1 and setuptools 59.5.0 were pinned for the published stack)")
    _, nano, _ = _port("nanogpt", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    env = next(d for d in nano["deviations"] if d["id"] == "environment")
    assert env["problem"].startswith("the published environment (a plain venv) does not see /opt/torch/.venv")
    assert env["instead"].endswith("pip and setuptools as the node has them") and "pinned" not in env["instead"]


def test_port_moves_apex_by_the_apex_rows(mirror, tmp_path) -> None:
    _, variant, _ = _port("opt-175b-azure", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    apex = next(s for s in variant["sources"] if s["install"] == "apex")
    assert apex["sha"] == "6424da3b4faa6c8f062da4a48c424fff3f02d42d"  # e2083df5 imports torch._six; 52e18c89: sm_70
    assert "--fast_multihead_attn" not in apex["build_options"] and "--cuda_ext" in apex["build_options"]
    dev = next(d for d in variant["deviations"] if d["id"] == "apex-e2083df5-to-6424da3b")
    assert "apex-torch-six" in dev["problem"] and "apex-cuda13-sm70" in dev["problem"]
    assert any(d["id"] == "apex-options-removed" for d in variant["deviations"])


def test_port_builds_the_apex_an_image_carried(mirror, tmp_path) -> None:
    _, variant, _ = _port("megatronapp", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert not any(p["name"] == "apex" for p in variant["packages"])
    apex = next(s for s in variant["sources"] if s["install"] == "apex")
    assert apex["sha"] == "6424da3b4faa6c8f062da4a48c424fff3f02d42d"
    assert apex["build_options"] == ["--cpp_ext", "--cuda_ext"]


def test_port_reads_a_package_at_its_release_tag(mirror, tmp_path) -> None:
    _, slurm, _ = _port("megatron-deepspeed-slurm", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    ds = next(s for s in slurm["sources"] if s["name"] == "deepspeed")  # 0.6.3 needs patches: built from v0.6.3
    assert (ds["ref"], ds["install"]) == ("v0.6.3", "wheel")
    assert not any(p["name"] == "deepspeed" for p in slurm["packages"])
    _, polaris, _ = _port("polaris-megatron-deepspeed", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    ds = next(p for p in polaris["packages"] if p["name"] == "deepspeed")  # 0.10.3 imports what torch 2.4 removed
    assert (ds["version"], ds.get("preinstalled", False)) == ("0.14.4", False)
    assert any(d["id"] == "deepspeed-elastic-agent" for d in polaris["deviations"])


def test_port_leaves_scheduler_launches_undecided(mirror, tmp_path) -> None:
    """A launch through a scheduler the node lacks, whose run layout names no program (ALCF's
    train-gpt3.sh under PBS, with mpiexec inside): undecided, with the line that shows it."""
    _, polaris, _ = _port("polaris-megatron-deepspeed", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert polaris["launcher"] == "local"
    why = next(u["why"] for u in polaris["undecided"] if u["field"] == "benchmark.command")
    assert "ALCF/launch.sh:2" in why and "SLURM_JOB" in why and "run.default: once" in why
    _, mapp, _ = _port("megatronapp", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert "two-pods" not in mapp.get("run", {}) and any(d["id"] == "pods-layouts" for d in mapp["deviations"])


def test_port_runs_the_published_program_without_its_scheduler(mirror, tmp_path) -> None:
    """sbatch on a node without Slurm: the run layout's deepspeed program and arguments on the
    node, with the published GPUs per node and its files written first; the multi-node
    variant (2 nodes at least) goes; the downloads stay as published."""
    res, slurm, out = _port("megatron-deepspeed-slurm", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    published = load_recipe("megatron-deepspeed-slurm")
    layout = published.run["default"]
    command = slurm["benchmark"]["command"]
    start = next(line for line in command.splitlines() if line.startswith("deepspeed "))
    assert start.startswith(f"deepspeed --num_gpus {published.benchmark.needs_gpus} ./pretrain_gpt.py ")
    assert start.split()[4:] == [w.replace("{cwd}", ".").replace("{job_dir}", ".envbuild-job") for w in layout.argv][1:]
    assert layout.files["ds_config.json"].rstrip("\n") in command
    assert "sbatch" not in command and "variants" not in slurm["benchmark"] and "multi-node" not in slurm["run"]
    dev = next(d for d in slurm["deviations"] if d["id"] == "benchmark-on-the-node")
    assert "sbatch" in dev["problem"] and "multi-node" in dev["instead"]
    assert [d["url"] for d in slurm["data"]] == [d.url for d in published.data]
    assert not slurm.get("undecided") and any("data kept as published" in n for n in res["notes"])
    assert _check(out) == (0, set())


def test_port_moves_past_a_source_no_mirror_holds(mirror, tmp_path) -> None:
    """Megatron fa6c0860 is in no mirror; metaseq imports it at its pin, and the first later
    commit of its main whose code imports no megatron carries what it used: metaseq goes there
    (its pin kept as a required ancestor) and Megatron goes. A tests-only import does not count."""
    _, variant, out = _port("opt-175b-azure", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    root, pins = mirror
    repo = root / "facebookresearch+metaseq" / "repo"
    later = subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=repo, capture_output=True, text=True,
                           check=True).stdout.split()
    metaseq = next(s for s in variant["sources"] if s["name"] == "metaseq")
    assert later[0] == pins["opt-175b-azure"]["metaseq"] and metaseq["sha"] == later[2]  # not later[1]: it still imports it
    assert pins["opt-175b-azure"]["metaseq"] in metaseq["requires_ancestors"]
    assert not any(s["name"] == "megatron" for s in variant["sources"]) and "megatron" not in variant["import_check"]
    dev = next(d for d in variant["deviations"] if d["id"] == "metaseq-past-megatron")
    assert "fa6c0860b62e is not in the mirror" in dev["problem"]
    assert not variant.get("undecided") and _check(out) == (0, set())
    assert any(s["install"] == "apex" for s in variant["sources"])  # Apex is not in this mirror: not compared


def test_port_leaves_out_a_source_whose_modules_the_moved_tree_builds(mirror, tmp_path) -> None:
    """With Apex in the mirror too: metaseq's later commit builds amp_C itself (its setup.py),
    as Apex does, so Apex goes; its modules no other source builds leave import_check."""
    root, pins = mirror
    both = tmp_path / "mirror"
    shutil.copytree(root, both)
    (apex,) = mirror_repo(both, "NVIDIA/apex", [({"setup.py": "ext = [CUDAExtension(name='amp_C', sources=[]),\n"
                                                         "       CUDAExtension(name='xentropy_cuda', sources=[])]\n"}, None)])
    src = _published("opt-175b-azure", {**pins["opt-175b-azure"], "apex": apex}, tmp_path)
    out = tmp_path / "v.yaml"
    proc = envbuild("port", str(src), "--target", "h100-venv", "--git-mirror", str(both), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    res, variant = json.loads(proc.stdout), yaml.safe_load(out.read_text())
    assert not any(s["install"] == "apex" for s in variant["sources"])
    assert not any(q["component"] == "apex" for q in variant.get("patches", []))  # apex-cuda-check went with it
    assert "amp_C" in variant["import_check"] and "xentropy_cuda" not in variant["import_check"]
    assert any("apex left out: metaseq" in n and "amp_C" in n for n in res["notes"])
    dev = next(d for d in variant["deviations"] if d["id"] == "metaseq-past-megatron")
    assert "apex" in dev["instead"] and "builds the same compiled modules" in dev["instead"]
    assert _check(out) == (0, set())


def test_port_leaves_out_what_only_a_cuda_build_would_replace(mirror, tmp_path) -> None:
    """The NGC image's Transformer Engine (no version stated, none on the node, only a CUDA
    source build on PyPI: packages.yaml): left out, out of import_check, and its module-level
    import in the setup's code guarded by the fix row that names it absent."""
    _, mapp, _ = _port("megatronapp", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert not any(p["name"] == "transformer-engine" for p in mapp["packages"])
    assert "transformer_engine" not in mapp["import_check"]
    assert any(d["id"] == "transformer-engine-not-installed" for d in mapp["deviations"])
    stand_in = next(q for q in mapp["patches"] if q["id"].startswith("transformer-engine-stand-in"))
    assert stand_in["file"].endswith("custom_layers/transformer_engine.py")
    assert not any(q["file"] == "Megatron/megatron/initialize.py" for q in mapp["patches"])


def test_port_pins_what_the_image_carried_or_leaves_it_to_the_lock(mirror, tmp_path) -> None:
    """wandb came with ALCF's conda module, installed there unpinned: the node lacks it, so it
    stays unpinned ('*') for the lock to resolve on the new stack, as any unpinned requirement."""
    _, polaris, _ = _port("polaris-megatron-deepspeed", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    wandb = next(p for p in polaris["packages"] if p["name"] == "wandb")
    assert wandb["version"] == "*" and not wandb.get("preinstalled") and "the lock pins" in wandb["why"]
    assert not any(u["field"].startswith("packages") for u in polaris["undecided"])
    dev = next(d for d in polaris["deviations"] if d["id"] == "packages-not-on-node")
    assert "unpinned where none is (wandb)" in dev["instead"]
    mpi = next(p for p in polaris["packages"] if p["name"] == "mpi4py")  # the node has it
    assert (mpi["version"], mpi["preinstalled"]) == ("4.1.2", True)


def _port_data(recipe: str, change: dict, mirror, tmp_path: Path, target: str = "h100-venv") -> tuple[dict, dict]:
    """Port the shipped ``recipe`` (sources pinned to the test trees) with ``change`` made to its
    data first (a key set to None is removed): the JSON summary and the variant."""
    _root, pins = mirror
    tmp_path.mkdir(exist_ok=True)
    src = _published(recipe, pins[recipe], tmp_path)
    data = yaml.safe_load(src.read_text())
    data.update(change)
    src.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}, sort_keys=False))
    out = tmp_path / f"{recipe}-{target}.yaml"
    proc = envbuild("port", str(src), "--target", target, "--git-mirror", str(mirror[0]), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), yaml.safe_load(out.read_text())


def test_port_resolves_as_of_the_stacks_day(mirror, tmp_path) -> None:
    """nanoGPT's published date (2023-06-22, before Python 3.12) predates h100-venv's stack: the
    variant resolves as of the day of the stack's row (node_stacks.yaml), deviation
    resolve-as-of, as the hand-made variants did; a recipe without a date gets that day too. A
    published date after that day is kept, as is the date of a port that keeps the published
    stack (test_port_to_the_published_hardware_changes_nothing_it_need_not); a stack the tables
    give no day (h100: a published torch build) drops the published date, with a note."""
    day = node_stack("h100-venv").resolve_as_of
    assert day is not None
    _, nano, _ = _port("nanogpt", mirror, tmp_path, "--git-mirror", str(mirror[0]))
    assert nano["resolve_as_of"] == day.date and list(nano).index("resolve_as_of") == list(nano).index("python") + 1
    dev = next(d for d in nano["deviations"] if d["id"] == "resolve-as-of")
    assert dev["published"].startswith("resolve_as_of 2023-06-22: ")
    assert dev["instead"].startswith(f"resolve_as_of {day.date}, {day.why}")
    assert "(datasets, wandb)" in dev["problem"] and "Python 3.12" in dev["problem"]
    assert dev["source"]["url"] == day.source
    _, undated = _port_data("nanogpt", {"resolve_as_of": None}, mirror, tmp_path / "undated")
    assert undated["resolve_as_of"] == day.date
    assert next(d for d in undated["deviations"] if d["id"] == "resolve-as-of")["published"].startswith("no resolve_as_of")
    _, later = _port_data("nanogpt", {"resolve_as_of": "2026-05-15"}, mirror, tmp_path / "later")
    assert later["resolve_as_of"] == "2026-05-15" and not any(d["id"] == "resolve-as-of" for d in later["deviations"])
    res, built = _port_data("nanogpt", {}, mirror, tmp_path / "h100", target="h100")
    assert "resolve_as_of" not in built and not any(d["id"] == "resolve-as-of" for d in built["deviations"])
    assert any(n.startswith("resolve_as_of 2023-06-22 dropped") for n in res["notes"])


def test_port_carries_the_resources_as_estimates(mirror, tmp_path) -> None:
    """The published resources describe the published hardware: the variant carries each figure
    as an estimate whose source says so (deviation resources-carried), never as measured or
    published for the new nodes; provision needs no GPU and the benchmark the GPUs the variant's
    benchmark needs (here a published 8-GPU measured figure for nanoGPT's 1-GPU bench.py), so
    the variant holds what tests/recipes/test_recipe_resources.py asks of a shipped recipe."""
    changed = [{**r, "gpus": 8, "basis": "measured"} if r["experiment"] == "benchmark" else r
               for r in yaml.safe_load((RECIPES / "nanogpt.yaml").read_text())["resources"]]
    _, variant = _port_data("nanogpt", {"resources": changed}, mirror, tmp_path)
    assert [r["experiment"] for r in variant["resources"]] == [r["experiment"] for r in changed]
    for old, new in zip(changed, variant["resources"], strict=True):
        assert new["basis"] == "estimate"
        assert new["source"] == (f"carried from nanogpt (its {old['basis']} figure: {old['source']}); not measured "
                                 "on h100-venv's nodes")
        assert {k: v for k, v in new.items() if k not in ("basis", "source", "gpus")} == {
            k: v for k, v in old.items() if k not in ("basis", "source", "gpus")}
    kinds = {r["experiment"]: r for r in variant["resources"]}
    assert kinds["provision"]["gpus"] == 0 and kinds["benchmark"]["gpus"] == variant["benchmark"]["needs_gpus"] == 1
    dev = next(d for d in variant["deviations"] if d["id"] == "resources-carried")
    assert dev["published"] == "provision: estimate; benchmark: measured" and "not measured" in dev["instead"]


def test_port_without_a_mirror_lists_the_rows_it_could_not_check(mirror, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("ENVBUILD_GIT_MIRROR", raising=False)  # the default mirror, where a shell sets one
    res, variant, out = _port("alpa-megatron", mirror, tmp_path)
    assert res["fixes"] == [] and {"megatron", "alpa"} <= set(res["unread"])
    whys = {u["field"]: u["why"] for u in variant["undecided"]}
    assert {"sources[0]", "sources[2]"} <= set(whys)
    # and what check would then refuse, by its row: the fused kernels' arch list was not read
    assert whys["sources"].startswith("check row megatron-fused-kernels-arch")
    assert "no --git-mirror given" in whys["sources[0]"] and "torch-six-inf" in whys["sources[0]"]
    assert _check(out) == (1, {"recipe-undecided", "megatron-fused-kernels-arch"})


def test_port_of_a_source_missing_from_the_mirror_is_undecided(mirror, tmp_path) -> None:
    """Without a later commit to move to (the variant's metaseq pinned at its branch head), the
    commit the mirror lacks stays undecided; so does a repository not mirrored at all (no
    move: the mirror is to be given), whatever later commits metaseq has."""
    root, pins = mirror
    head = subprocess.run(["git", "rev-parse", "main"], cwd=root / "facebookresearch+metaseq" / "repo",
                          capture_output=True, text=True, check=True).stdout.strip()
    bare = tmp_path / "without"
    shutil.copytree(root, bare)
    shutil.rmtree(bare / "ngoyal2707+Megatron-LM")
    for where, metaseq, why in ((root, head, "is not in the mirror"), (bare, pins["opt-175b-azure"]["metaseq"], "no mirror of")):
        src = _published("opt-175b-azure", {**pins["opt-175b-azure"], "metaseq": metaseq}, tmp_path)
        out = tmp_path / "v.yaml"
        proc = envbuild("port", str(src), "--target", "h100-venv", "--git-mirror", str(where), "-o", str(out), "--json")
        assert proc.returncode == 0, proc.stderr
        res, variant = json.loads(proc.stdout), yaml.safe_load(out.read_text())
        assert "megatron" in res["unread"] and not any(d["id"] == "metaseq-past-megatron" for d in variant["deviations"])
        assert any(u["field"] == "sources[1]" and why in u["why"] for u in variant["undecided"]), variant["undecided"]


def test_port_picks_the_closest_build_for_the_arch() -> None:
    alpa = load_recipe("alpa-megatron")
    h100 = load_target("h100")  # no torch of its own: a published build with sm_90, CUDA 13 for nvcc 13.0
    stack = choose_stack(alpa, h100, from_target(h100))
    assert (stack.torch, stack.cuda, stack.python, stack.node_own) == ("2.11.0", "cu130", "3.12", False)
    nd96 = load_target("azure-nd96")  # A100s (sm_80): torch 1.8.2+cu111 itself runs there
    stack = choose_stack(alpa, nd96, from_target(nd96))
    assert (stack.torch, stack.cuda) == ("1.8.2", "cu111")


def test_port_to_the_published_hardware_changes_nothing_it_need_not(tmp_path) -> None:
    out = tmp_path / "v.yaml"
    proc = envbuild("port", "alpa-megatron", "--target", "azure-nd96", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    variant = yaml.safe_load(out.read_text())
    assert variant["name"] == "alpa-megatron-sm80" and variant["python"] == "3.8"
    assert variant["resolve_as_of"] == "2021-11-12" and variant["packages"][0]["version"] == "1.8.2"
    assert not any(d["id"].startswith(("torch-", "apex-", "resolve-as-of")) for d in variant["deviations"])


def test_port_needs_the_nodes() -> None:
    proc = envbuild("port", "alpa-megatron")
    assert proc.returncode == 2 and "--target T or --facts FILE" in proc.stderr


def test_port_to_a_nodes_facts_reads_its_torch_and_its_gpu_count(mirror, tmp_path) -> None:
    """--facts alone: the node's own torch from its pip list, judged as the local target; the
    published 4-GPU run on a 1-GPU node is left undecided by the check row that refuses it."""
    node = from_target(load_target("h100-venv")).model_copy(update={
        "host": "gpu1", "origin": "collected", "pip_packages": {"torch": "2.11.0", "numpy": "2.5.2", "pybind11": "3.1.0"}})
    facts = tmp_path / "node.json"
    facts.write_text(node.to_json())
    _root, pins = mirror
    src = _published("megatronapp", pins["megatronapp"], tmp_path)
    out = tmp_path / "v.yaml"
    proc = envbuild("port", str(src), "--facts", str(facts), "--git-mirror", str(mirror[0]), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    variant = yaml.safe_load(out.read_text())
    assert variant["targets"] == ["local"] and variant["packages"][0]["version"] == "2.11.0"
    assert any(p["name"] == "pybind11" and p["version"] == "3.1.0" and p["preinstalled"] for p in variant["packages"])
    gpus = next(u["why"] for u in variant["undecided"] if u["field"] == "benchmark.needs_gpus")
    assert gpus.startswith("check row too-few-gpus")


def test_module_examples_hold() -> None:
    """The example in envbuild.port.launch (a run layout's program on one node) is what it returns."""
    import doctest

    from envbuild.port import launch

    result = doctest.testmod(launch)
    assert result.attempted > 0 and result.failed == 0
