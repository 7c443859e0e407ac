"""``envbuild draft`` then ``envbuild port`` on a published setup envbuild has never seen, made
here as a real git repository with the instruction forms read in published setups that the
shipped seven do not use: a README that builds Apex from a clone (``git clone``, ``cd apex``,
``git checkout SHA``, ``pip install ... ./ 2>&1 | tee build.log``: bigscience-workshop/
Megatron-DeepSpeed README.md:33-35), ``uv venv --python`` and ``uv pip install`` with a PyTorch
wheel index and ``--no-build-isolation`` (huggingface/nanotron README.md:44-67), the tree
installed with an extra whose requirements setup.py fills by subscript (``pip install -e
".[gpu]"``: mosaicml/llm-foundry v0.4.0 README.md:140, setup.py:89-96), an alternative for ROCm
(llm-foundry README.md:187), a Dockerfile whose base image is a build argument without a default
(llm-foundry Dockerfile:4-5), ``docker run`` of an image with a placeholder tag (NVIDIA/Megatron-LM
23.04 README.md:65-66), and ``"np.int"`` inside a string (nanotron
src/nanotron/serialize/metadata.py:113).

Asserted: what the draft reads of each form, citing its line; that the port of the draft keeps
the draft's open questions it does not answer itself (benchmark, a requirement by URL) and
answers the others (Python, targets, torch's CUDA variant, the environment, Apex's commit); that
a fix row matches Python code only, not a string or a comment; and that the draft, once its
author has filled what port does not decide, ports to a variant ``check`` finds FEASIBLE."""

from __future__ import annotations

import doctest
import importlib
import json
from functools import partial
from pathlib import Path

import pytest
import yaml
from support.clirun import envbuild
from support.gitrepo import git, mirrored

from envbuild.compat.commits import apex_commits
from envbuild.facts.profile import from_target
from envbuild.port.scan import _patches_of
from envbuild.port.stack import choose_stack
from envbuild.port.tables import fixes
from envbuild.recipes import load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.targets import load_target

pytestmark = pytest.mark.integration


PUBLISHED = "2023-06-01T12:00:00Z"  # the day these setups were published
_git = partial(git, date=PUBLISHED)
_mirrored = partial(mirrored, date=PUBLISHED)


APEX = {"setup.py": "import sys\nfrom setuptools import setup\nif '--cpp_ext' in sys.argv:\n    pass\n"
                    "setup(name='apex', install_requires=['packaging>20.6'])\n"}

README = """\
# gpt-trainer

```shell
curl -LsSf https://astral.sh/uv/install.sh | sh
uv venv train-env --python 3.11 && source train-env/bin/activate
uv pip install torch==2.1.2 --index-url https://download.pytorch.org/whl/cu121
git clone https://github.com/acme/gpt-trainer
cd gpt-trainer
uv pip install -e ".[gpu]"
uv pip install ninja "flash-attn>=2.5.0" --no-build-isolation
```

Apex, from its repository:

```
git clone https://github.com/NVIDIA/apex
cd apex
git checkout {apex}
pip install -v --global-option="--cpp_ext" --global-option="--cuda_ext" --no-cache-dir ./  2>&1 | tee build.log
cd ..
```

On AMD GPUs instead:

```bash
pip3 install torch torchvision --index-url https://download.pytorch.org/whl/rocm5.6
```

Or in NGC's container:

```bash
docker run --gpus all -it --rm -v $PWD:/workspace nvcr.io/nvidia/pytorch:xx.xx-py3
```

```bash
wget https://example.org/corpus/tiny.jsonl -P data/
torchrun --nproc_per_node=8 train.py --config configs/tiny.yaml
```
"""

SETUP_PY = """\
from setuptools import setup

install_requires = [
    'numpy',
    'einops==0.6.1',
]

extra_deps = {}
extra_deps['dev'] = ['pytest>=7']
extra_deps['gpu'] = [
    'mosaicml-turbo==0.0.4',
    'xentropy-cuda-lib@git+https://github.com/acme/flash-attention.git@v1.0.9#subdirectory=csrc/xentropy',
]
extra_deps['all'] = set(dep for deps in extra_deps.values() for dep in deps)

setup(name='gpt-trainer', install_requires=install_requires, extras_require=extra_deps)
"""

TRAINER = {
    "trainer/__init__.py": "",
    "trainer/optim.py": "import torch\nfrom torch._six import inf\n",
    "trainer/meta.py": ("import numpy as np\n\n\ndef size_of(size):\n"
                        "    return int(size.strip('np.int()')) if \"np.int\" in size else int(size)\n\n\n"
                        "def count(x):\n    return x.astype(np.int)  # np.int, removed in NumPy 1.24\n"),
    "train.py": "import trainer\n",
    "Dockerfile": ("ARG BASE_IMAGE\nFROM $BASE_IMAGE\nRUN pip install -e .\n"
                   "RUN wget https://github.com/mikefarah/yq/releases/download/v4.44.1/yq_linux_amd64 -O /usr/local/bin/yq\n"),
}


@pytest.fixture(scope="module")
def unseen(tmp_path_factory) -> dict:
    """The mirror (Apex, the setup at v1.0) and the setup's draft, made once."""
    tmp = tmp_path_factory.mktemp("unseen")
    mirror = tmp / "mirror"
    mirror.mkdir()
    apex = _mirrored(mirror, "NVIDIA/apex", APEX)
    files = {"README.md": README.format(apex=apex), "setup.py": SETUP_PY, **TRAINER}
    sha = _mirrored(mirror, "acme/gpt-trainer", files, tag="v1.0")
    out = tmp / "gpt-trainer.yaml"
    res = envbuild("draft", "https://github.com/acme/gpt-trainer", "--ref", "v1.0", "--git-mirror", str(mirror),
                   "-o", str(out))
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    return {"mirror": mirror, "apex": apex, "sha": sha, "tmp": tmp, "draft": out, "text": text,
            "data": yaml.safe_load(text), "readme": README.format(apex=apex)}


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _packages(unseen: dict) -> dict[str, dict]:
    return {p["name"]: p for p in unseen["data"]["packages"]}


def test_the_draft_loads(unseen) -> None:
    assert load_recipe(unseen["draft"]).name == "gpt-trainer"


def test_uv_venv_and_uv_pip_install_are_read(unseen) -> None:
    """nanotron README.md:44-67: `uv venv --python 3.11`, `uv pip install torch --index-url
    .../whl/cu121`, `uv pip install ... --no-build-isolation`."""
    data, text = unseen["data"], unseen["text"]
    assert data["python"] == "3.11" and f"python 3.11: README.md:{_line(unseen['readme'], 'uv venv')}" in text
    torch = _packages(unseen)["torch"]
    assert (torch["version"], torch["cuda"], torch["index"], torch["index_kind"]) == (
        "2.1.2", "cu121", "https://download.pytorch.org/whl/cu121", "index-url")
    flash = _packages(unseen)["flash-attn"]
    assert flash["build_isolation"] is False and flash["version"] == ">=2.5.0"
    assert not any(u["field"] in ("python", "packages[0].cuda") for u in data["undecided"])


def test_a_rocm_alternative_is_left_out(unseen) -> None:
    assert "torchvision" not in _packages(unseen)
    rocm = _line(unseen["readme"], "rocm5.6")
    assert f"README.md:{rocm}: torchvision: a ROCm build (AMD GPUs), not a CUDA one: left out" in unseen["text"]


def test_the_extra_the_tree_is_installed_with_gives_packages(unseen) -> None:
    """llm-foundry: `pip install -e ".[gpu]"` with setup.py's extra_deps['gpu'] = [...]."""
    pkgs = _packages(unseen)
    turbo = pkgs["mosaicml-turbo"]
    assert turbo["version"] == "0.0.4" and turbo["source"]["note"] == f"setup.py:{_line(SETUP_PY, 'turbo')}"
    assert "pytest" not in pkgs  # extra [dev] is not installed
    main = unseen["data"]["sources"][0]
    assert main["install"] == "editable" and f"README.md:{_line(unseen['readme'], '.[gpu]')}" in main["why"]
    undecided = {u["field"]: u["why"] for u in unseen["data"]["undecided"]}
    assert "xentropy-cuda-lib@git+" in undecided["sources"]
    assert "extras_require['all'] is computed, not a literal: not read" in unseen["text"]


def test_a_clone_installed_in_its_folder_is_a_source(unseen) -> None:
    """bigscience Megatron-DeepSpeed README.md:33-35: git clone apex; cd apex; pip install ... ./"""
    data = unseen["data"]
    apex = next(s for s in data["sources"] if s["url"] == "https://github.com/NVIDIA/apex")
    assert (apex["sha"], apex["install"], apex["build_options"]) == (unseen["apex"], "apex", ["--cpp_ext", "--cuda_ext"])
    assert apex["source"]["note"] == f"README.md:{_line(unseen['readme'], 'tee build.log')}"
    assert not any(u["field"].startswith("sources[1]") for u in data["undecided"])  # checked out at a SHA


def test_a_redirection_is_no_word_of_the_command(unseen) -> None:
    text = unseen["text"]
    assert "2>" not in text and "'2>'" not in text
    assert "[other] 1\n" not in text and "build.log: not a requirement" not in text


def test_the_images_are_named_in_the_environment_question(unseen) -> None:
    undecided = {u["field"]: u["why"] for u in unseen["data"]["undecided"]}
    assert "Dockerfile:2 builds FROM $BASE_IMAGE, a build argument with no default" in undecided["environment"]
    docker = _line(unseen["readme"], "docker run")
    assert f"README.md:{docker} runs nvcr.io/nvidia/pytorch:xx.xx-py3 (its tag is a placeholder)" in undecided["environment"]


def test_a_download_of_a_tool_is_not_data(unseen) -> None:
    """`curl ... install.sh | sh` installs uv; `wget ... -O /usr/local/bin/yq` a program
    (NVIDIA/Megatron-LM core_v0.12.0 Dockerfile.ci.dev:55); the corpus fetched into data/ is data."""
    why = {u["field"]: u["why"] for u in unseen["data"]["undecided"]}["data"]
    assert "https://example.org/corpus/tiny.jsonl" in why and "yq" not in why and "astral" not in why
    assert "[other] curl -LsSf https://astral.sh/uv/install.sh" in unseen["text"]


@pytest.fixture(scope="module")
def ported(unseen) -> dict:
    """The draft ported to h100-venv with the mirror: the JSON summary, the variant, its path."""
    out = unseen["tmp"] / "gpt-trainer-sm90.yaml"
    res = envbuild("port", str(unseen["draft"]), "--target", "h100-venv", "--git-mirror", str(unseen["mirror"]),
                   "-o", str(out), "--json")
    assert res.returncode == 0, res.stderr
    return {"summary": json.loads(res.stdout), "variant": yaml.safe_load(out.read_text()), "out": out}


def test_port_keeps_the_open_questions_of_the_draft_it_does_not_answer(ported) -> None:
    fields = {u["field"]: u["why"] for u in ported["variant"]["undecided"]}
    # benchmark, data and the requirement by URL stay open; python, targets, environment and
    # torch's CUDA variant port answers itself (the stack, --target, a venv on the node)
    assert set(fields) == {"benchmark", "data", "sources"}, fields
    assert "train.py --config configs/tiny.yaml" in fields["benchmark"]
    assert "(undecided in gpt-trainer; port does not decide it)" in fields["sources"]
    assert any(n.startswith("published undecided environment decided by port") for n in ported["summary"]["notes"])
    rc = envbuild("check", str(ported["out"]), "--target", "h100-venv", "--json")
    assert rc.returncode == 1  # refused, as the draft was, for what is still open and for nothing else
    assert {v["rule"] for v in json.loads(rc.stdout)["violations"] if v["severity"] == "error"} == {"recipe-undecided"}


def test_port_patches_python_code_not_its_strings_or_comments(ported) -> None:
    """nanotron metadata.py:113 tests `"np.int" in size`: text, not NumPy's removed alias."""
    patches = ported["variant"]["patches"]
    assert {q["file"] for q in patches} == {"trainer/meta.py", "trainer/optim.py"}
    meta = [(q["id"], q.get("old"), q.get("new")) for q in patches if q["file"] == "trainer/meta.py"]
    assert meta == [("numpy-int-alias-meta", "    return x.astype(np.int)  # np.int, removed in NumPy 1.24",
                     "    return x.astype(int)  # np.int, removed in NumPy 1.24")]


def test_the_filled_draft_ports_to_a_feasible_variant(unseen, tmp_path) -> None:
    """The author settles what port cannot (the benchmark, the requirement by URL) and leaves
    the rest (the Python placeholder, the targets, the image, torch's variant, Apex) to port."""
    data = yaml.safe_load(unseen["text"])
    data["undecided"] = [u for u in data["undecided"] if u["field"] not in ("benchmark", "sources", "data")]
    draft = tmp_path / "gpt-trainer.yaml"
    draft.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "gpt-trainer-sm90.yaml"
    res = envbuild("port", str(draft), "--target", "h100-venv", "--git-mirror", str(unseen["mirror"]), "-o", str(out))
    assert res.returncode == 0, res.stderr
    variant = yaml.safe_load(out.read_text())
    assert "undecided" not in variant
    assert variant["python"] == "3.12" and variant["targets"] == ["h100-venv"]
    # the README's Apex commit is not in envbuild's table: placed by its date in the mirror
    # (2023-06-01), it moves to the first known commit not older that the Apex rows pass
    apex = next(s for s in variant["sources"] if s["install"] == "apex")
    assert apex["build_options"] == ["--cpp_ext", "--cuda_ext"] and apex["sha"] != unseen["apex"]
    assert apex["sha"] in {c.sha for c in apex_commits()} and apex["ref"] == apex["sha"]
    moved = next(d for d in variant["deviations"] if d["id"].startswith(f"apex-{unseen['apex'][:8]}-to-"))
    assert f"{unseen['apex'][:8]} (committed 2023-06-01, read in the mirror) is not in" in moved["problem"]
    assert min(c.date for c in apex_commits() if c.sha == apex["sha"]) >= "2023-06-01"
    check = envbuild("check", str(out), "--target", "h100-venv")
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_fix_row_matches_python_code_not_strings_or_comments() -> None:
    rows = {r.id: r for r in fixes()}
    text = "import numpy as np\nif \"np.int\" in size:\n    pass\n# np.int was removed\n"
    assert _patches_of(text, rows["numpy-int-alias"], "9.0", "meta.py") == []
    assert _patches_of(text, rows["numpy-int-alias"], "9.0", "notes.txt")  # not Python: every match counts
    gencode = "cc_flag = ['-gencode', 'arch=compute_70,code=sm_70']\n"  # matches: anywhere
    assert _patches_of(gencode, rows["gencode-sm70"], "9.0", "setup.py")


def test_module_examples_hold() -> None:
    """The examples in the docstrings of the modules these forms touch are what they return."""
    for name in ("envbuild.draft.clones", "envbuild.draft.pipcmd", "envbuild.draft.compose", "envbuild.draft.survey",
                 "envbuild.draft.dockerfile", "envbuild.port.scan"):
        result = doctest.testmod(importlib.import_module(name))
        assert result.attempted > 0 and result.failed == 0, name


@pytest.mark.parametrize(("published", "build"), [("2.2.0", ("2.2.2", "cu121")), ("2.3.0", ("2.3.1", "cu121")),
                                                   ("2.5.0", ("2.5.1", "cu124"))])
def test_a_published_torch_between_the_older_rows_moves_to_its_own_minor(published, build) -> None:
    """On a node without its own torch (target h100: Python 3.12, sm_90), a setup of torch 2.2,
    2.3 or 2.5 takes that minor's last build (torch_builds.yaml), not the next row's 2.4.1 or 2.6.0."""
    data = load_recipe("nanogpt").model_dump(by_alias=True, exclude_unset=True)
    for pkg in data["packages"]:
        if pkg["name"] == "torch":
            pkg.update(version=published, cuda="cu121")
    target = load_target("h100")
    stack = choose_stack(Recipe.model_validate(data), target, from_target(target))
    assert (stack.torch, stack.cuda, stack.python, stack.node_own) == (*build, "3.12", False)


def _draft_of(tmp: Path, slug: str, files: dict[str, str]) -> dict:
    mirror = tmp / "mirror"
    mirror.mkdir(exist_ok=True)
    _mirrored(mirror, slug, files, tag="v1")
    res = envbuild("draft", f"https://github.com/{slug}", "--ref", "v1", "--git-mirror", str(mirror), "--json")
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(json.loads(res.stdout)["text"])


def test_a_pip_install_of_the_repository_itself_is_the_trees_install(tmp_path) -> None:
    """saforem2/ezpz README.md:24: `uv pip install git+https://github.com/saforem2/ezpz`, the
    drafted repository itself: its install, not a second source of the same tree."""
    data = _draft_of(tmp_path, "acme/tool", {
        "README.md": "# tool\n\n```bash\nuv pip install git+https://github.com/acme/tool\n```\n",
        "pyproject.toml": '[project]\nname = "tool"\nversion = "1"\ndependencies = ["rich"]\n'})
    assert [(s["url"], s["install"]) for s in data["sources"]] == [("https://github.com/acme/tool", "wheel")]
    assert "README.md:4: uv pip install git+https://github.com/acme/tool" in data["sources"][0]["why"]


def test_an_extra_copied_from_another_and_a_later_pin_of_an_unpinned_package(tmp_path) -> None:
    """mosaicml/llm-foundry setup.py:110 `extra_deps['gpu'] = copy.deepcopy(extra_deps['gpu-flash2'])`;
    README.md:175's unpinned `pip install flash-attn` keeps the extra's pin (pip keeps it)."""
    setup = ("import copy\nfrom setuptools import setup\nextra_deps = {}\n"
             "extra_deps['gpu-flash2'] = [\n    'flash-attn==2.7.4.post1',\n]\n"
             "extra_deps['gpu'] = copy.deepcopy(extra_deps['gpu-flash2'])\n"
             "setup(name='foundry', extras_require=extra_deps)\n")
    readme = "# foundry\n\n```bash\npip install flash-attn\npip install -e '.[gpu]'\n```\n"
    data = _draft_of(tmp_path, "acme/foundry", {"README.md": readme, "setup.py": setup})
    flash = {p["name"]: p for p in data["packages"]}["flash-attn"]
    assert flash["version"] == "2.7.4.post1" and flash["source"]["note"] == "setup.py:5"
    assert flash["why"].startswith("README.md:4: flash-attn; also setup.py:5: flash-attn==2.7.4.post1 (extra [gpu]")
