"""The shipped recipes as data: they load, every pin is complete, sourced and explained."""

import re
from datetime import date

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild.recipes import all_recipes, default_recipe, load_recipe, recipe_names
from envbuild.recipes.schema import SHA_RE, Recipe
from envbuild.targets import target_names

EXPECTED = {"alpa-megatron", "opt-175b-azure", "polaris-megatron-deepspeed", "megatronapp",
            "megatron-deepspeed-slurm", "cpu-reference", "h100-megatron-deepspeed", "alpa-megatron-h100",
            "megatronapp-h100", "megatron-deepspeed-slurm-h100", "opt-175b-azure-h100", "nanogpt", "nanogpt-h100",
            "gpt-neox", "gpt-neox-sm90"}
RECIPES = sorted(recipe_names())
PLACEHOLDER = re.compile(r"\{sources\.([A-Za-z0-9_.-]+)\}")


def test_the_six_published_setups_are_shipped():
    assert set(RECIPES) == EXPECTED


@pytest.fixture(params=RECIPES)
def recipe(request) -> Recipe:
    return load_recipe(request.param)


def test_loads_and_is_named_for_its_file(recipe):
    assert recipe.name in RECIPES
    assert recipe.title and recipe.description and recipe.published.url


def test_round_trips_through_json(recipe):
    again = Recipe.model_validate(recipe.model_dump(mode="json", by_alias=True))
    assert again == recipe


def test_exactly_one_default_and_it_is_cpu_reference():
    defaults = [r.name for r in all_recipes() if r.default]
    assert defaults == ["cpu-reference"]
    assert default_recipe().name == "cpu-reference"


def test_every_git_source_is_pinned_or_says_why_not(recipe):
    for src in recipe.sources:
        assert (src.sha and SHA_RE.match(src.sha)) or (src.unverified and src.unverified.strip()), src.name
        assert all(SHA_RE.match(a) for a in src.requires_ancestors)
        assert src.why.strip(), src.name


def _version_ok(version: str, preinstalled: bool, as_of: str | None) -> bool:
    if version == "*":
        # "whatever the image/module ships" (preinstalled), or an unpinned requirement of the
        # published instructions (nanoGPT's README: pip install torch numpy ...), which only a
        # resolve_as_of makes one release: the lock pins the one of that day, with its hashes
        return preinstalled or as_of is not None
    try:
        Version(version)
        return True
    except ValueError:
        SpecifierSet(version)  # raises when neither a version nor a specifier
        return True


def test_every_package_has_a_version_and_a_reason(recipe):
    for pkg in recipe.packages:
        assert pkg.version.strip() and _version_ok(pkg.version, pkg.preinstalled, recipe.resolve_as_of), pkg.name
        assert len(pkg.why.strip()) > 20, pkg.name


def test_names_and_ids_are_unique(recipe):
    for items in ([p.name.lower() for p in recipe.packages], [s.name for s in recipe.sources],
                  [p.id for p in recipe.patches], [d.id for d in recipe.deviations]):
        assert len(items) == len(set(items)), items


def test_targets_are_shipped_profiles(recipe):
    assert recipe.targets and set(recipe.targets) <= set(target_names())


def test_resolve_as_of_is_a_date_of_the_setups_era(recipe):
    if recipe.resolve_as_of is None:
        assert recipe.default  # only envbuild's own recipe resolves against today's index
        return
    day = date.fromisoformat(recipe.resolve_as_of)
    assert date(2021, 1, 1) <= day <= date(2026, 12, 31)  # h100-megatron-deepspeed: torch 2.11's era


def test_placeholders_name_existing_sources(recipe):
    bench = recipe.benchmark
    assert bench is not None and bench.parser and bench.metric
    texts = [bench.command, bench.cwd or "", *bench.env.values(), *bench.variants.values()]
    names = {s.name for s in recipe.sources}
    for text in texts:
        for name in PLACEHOLDER.findall(text):
            assert name in names, f"{recipe.name}: {{sources.{name}}} names no source"


def test_patches_are_well_formed(recipe):
    for p in recipe.patches:
        assert p.why.strip()
        if p.kind == "regex":
            re.compile(p.old)
        if p.kind in ("replace", "regex"):
            assert p.old != p.new


def test_projects_that_collide_on_pypi_never_come_from_pypi(recipe):
    for pkg in recipe.packages:
        if pkg.name.lower() in ("apex", "metaseq", "ezpz"):
            assert pkg.preinstalled or pkg.index, pkg.name


def test_deviations_are_complete(recipe):
    for d in recipe.deviations:
        assert d.published.strip() and d.problem.strip() and d.instead.strip(), d.id


# ---- facts from PINS.md that the recipes must carry ----------------------------------------

def test_alpa_megatron_pins():
    r = load_recipe("alpa-megatron")
    mg = r.source("megatron")
    assert (mg.ref, mg.sha, mg.install) == ("alpa-osdi22-benchmark", "c28bbd208d16ffea61fa3c545e66b3a9d87f9d84", "pth")
    assert mg.requires_ancestors == ["b31e1296354e979722627a6c4dedafe19b51fa97"]
    torch = r.package("torch")
    assert (torch.version, torch.cuda, torch.index_kind) == ("1.8.2", "cu111", "find-links")
    assert torch.index == "https://download.pytorch.org/whl/lts/1.8/torch_lts.html"
    assert r.python == "3.8"
    assert r.apex.build_options == ["--cpp_ext", "--cuda_ext"]
    tie = next(p for p in r.patches if p.id == "tie-embedding-disabled")
    assert tie.kind == "expect" and tie.file == "megatron/training.py" and "and False" in tie.new
    assert any(p.kind == "apex-cuda-check" and p.component == "apex" for p in r.patches)
    assert r.import_check == ["megatron", "apex", "amp_C"]
    assert set(r.targets) == {"azure-nd96", "h100", "slurm", "local"}
    assert r.benchmark.parser == "alpa-benchmark"  # benchmark_gpt_one_case.py's write_tsv result line


def test_opt_pins_keep_the_published_metaseq_commit_as_ancestor():
    r = load_recipe("opt-175b-azure")
    ms = r.source("metaseq")
    assert "a1a4e733d27898056fe08fb8f6a1fa6af06ca55a" in ms.requires_ancestors
    assert ms.build == ["python setup.py build_ext --inplace"] and ms.install == "editable"
    assert ms.env["SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL"] == "True"
    assert r.source("megatron").ref == "fairseq_v3"
    fs = r.source("fairscale")
    assert (fs.sha, fs.install) == ("191553190d73a5ef4a48687c889d4b1d94532135", "wheel")
    assert r.apex.build_options == ["--cpp_ext", "--cuda_ext", "--deprecated_fused_adam", "--xentropy",
                                    "--fast_multihead_attn"]
    # below 1.24: metaseq@5ca60055 uses np.float (deviation metaseq-np-float), and so below 2
    assert r.package("torch").cuda == "auto" and r.package("numpy").version == "<1.24"
    assert r.environment.kind == "conda" and r.python == "3.9"
    b = r.benchmark
    assert (b.parser, b.metric, b.threshold, b.needs_gpus) == ("opt-baselines", "words_per_second", 200000, 8)
    assert "--benchmark" in b.command and "125m" in b.command and " -t " not in b.command
    ids = {d.id for d in r.deviations}
    assert {"torch-1.10.0-cu116", "fairseq-v3-vs-metaseq-a1a4e733", "apex-sed-no-op", "sklearn-brownout",
            "num-trials-misuse", "requirements-txt-conflicts", "numpy-2", "metaseq-np-float"} <= ids


def test_node_type_variables_live_on_the_target():
    from envbuild.targets import load_target

    r = load_recipe("opt-175b-azure")
    azure = load_target("azure-nd96")
    assert r.benchmark.target_env and set(r.benchmark.target_env) <= set(azure.env)
    assert not any(k.startswith(("NCCL_", "UCX_")) for k in r.env)


def test_polaris_uses_the_module_and_git_ezpz():
    r = load_recipe("polaris-megatron-deepspeed")
    env = r.environment
    assert (env.kind, env.conda_module, env.system_site_packages) == ("module-venv", "conda/2023-10-04", True)
    assert {p.name for p in r.packages if p.preinstalled} >= {"torch", "deepspeed", "apex"}
    assert r.source("ezpz").sha == "ae490bd966be99cb2327a5f6da0c9c3b48456e65"
    assert r.package("ezpz") is None  # PyPI's ezpz is another project
    assert r.benchmark.env["MODEL_SIZE_KEY"] == "GPT25B" and r.launcher == "pbs"


def test_container_recipes_name_their_images():
    app = load_recipe("megatronapp")
    assert app.environment.base_image == "nvcr.io/nvidia/pytorch:23.04-py3" and app.launcher == "kubernetes"
    # the ranks' InfiniBand addresses are read at run time, not compiled into the image
    assert any("MEGATRONAPP_IB_ADDRESSES" in (p.new or "") for p in app.patches)
    assert not any("{inventory." in (p.new or "") + (p.old or "") for p in app.patches)
    slurm = load_recipe("megatron-deepspeed-slurm")
    assert slurm.environment.base_image == "nvcr.io/nvidia/pytorch:22.02-py3" and slurm.launcher == "slurm"
    assert any("preprocess_data.py" in cmd for s in slurm.sources for cmd in s.build)


def test_cpu_reference_is_small_and_needs_no_git():
    r = load_recipe("cpu-reference")
    assert r.sources == [] and r.patches == []
    assert (r.environment.kind, r.python, r.targets) == ("venv", "3.11", ["local"])
    for pkg in r.packages:
        Version(pkg.version)  # exact pins only
        assert not pkg.preinstalled
        # PyPI for everything but torch, whose CPU build lives on PyTorch's CPU index
        assert pkg.index is None or (pkg.name == "torch" and pkg.index.endswith("/whl/cpu"))
    torch = r.package("torch")
    assert (torch.version, torch.cuda) == ("2.13.0", "cpu")
    assert {"torch", "numpy", "einops"} <= set(r.import_check)
    # judged by a same-hardware ratio (MFU of the measured matmul peak), never by a CPU-specific rate
    assert (r.benchmark.parser, r.benchmark.metric, r.benchmark.threshold) == ("envbuild-smoke", "mfu", 0.10)


@pytest.mark.integration
def test_cpu_reference_pins_exist_on_the_package_index():
    """Ask pip (the real index configuration of this machine) for each pinned version."""
    import subprocess
    import sys

    r = load_recipe("cpu-reference")
    for pkg in r.packages:
        out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", pkg.name],
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        listed = re.search(r"Available versions: (.*)", out.stdout)
        assert listed, out.stdout
        versions = {v.strip().split("+")[0] for v in listed.group(1).split(",")}
        assert pkg.version in versions, f"{pkg.name} {pkg.version} not on the index"
