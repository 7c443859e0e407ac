"""``envbuild draft`` end to end: real git repositories made here (a GPT-NeoX-shaped setup tagged
v1.0, a DeeperSpeed-shaped dependency in a mirror folder), the CLI run in-process, the recipe it
writes loaded by envbuild's loader, refused by ``check`` naming each undecided field, and read
by the lock (the dependency's requirements/requirements.txt, named by the draft)."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

import pytest
import yaml
from support.clirun import envbuild
from support.gitrepo import commit, git

from envbuild.lock.srclock import source_dependencies
from envbuild.recipes import load_recipe

pytestmark = pytest.mark.integration


PUBLISHED = "2022-03-10T12:00:00Z"  # the day the walk-through's setup was published
_git = partial(git, date=PUBLISHED)
_commit = partial(commit, date=PUBLISHED)


DEEPERSPEED = {
    "setup.py": "from setuptools import setup\n\ndef fetch_requirements(path):\n    with open(path) as fd:\n"
                "        return [r.strip() for r in fd.readlines()]\n\n"
                "install_requires = fetch_requirements('requirements/requirements.txt')\n"
                "setup(name='deepspeed', install_requires=install_requires)\n",
    "requirements/requirements.txt": "hjson\nninja\nnumpy\npsutil\n",
}

README = """\
# GPT-NeoX

```bash
pip install -r requirements/requirements.txt
python ./megatron/fused_kernels/setup.py install
```

```bash
python prepare_data.py -d ./data enwik8
python ./deepy.py train.py -d configs 125M.yml local_setup.yml
```
"""

DOCKERFILE = """\
ARG CUDA=11.1.1
FROM nvidia/cuda:${CUDA}-devel-ubuntu20.04
RUN apt-get update && \\
    apt-get install -y git python3.8 python3.8-dev pdsh
RUN pip install torch==1.8.1+cu111 -f https://download.pytorch.org/whl/torch_stable.html
"""


@pytest.fixture
def setup(tmp_path: Path) -> dict:
    """A mirror folder with DeeperSpeed (bare, OWNER+NAME/repo) and GPT-NeoX (work tree, v1.0)."""
    ds_sha = _commit(tmp_path / "work" / "DeeperSpeed", DEEPERSPEED)
    mirror = tmp_path / "mirror"
    _git("clone", "-q", "--bare", str(tmp_path / "work" / "DeeperSpeed"),
         str(mirror / "EleutherAI+DeeperSpeed" / "repo"), cwd=tmp_path)
    neox = tmp_path / "work" / "gpt-neox"
    sha = _commit(neox, {
        "requirements/requirements.txt": (
            f"git+https://github.com/EleutherAI/DeeperSpeed.git@{ds_sha}#egg=deepspeed\n"
            "einops==0.3.0\nftfy==6.0.1\n-r requirements-base.txt\n-r ../../etc/shadow\ntransformers~=4.16.0\n"),
        "requirements/requirements-base.txt": "numpy==1.22.0\nregex\n",
        "requirements/requirements-dev.txt": "pytest==6.2.3\n",
        "README.md": README, "Dockerfile": DOCKERFILE,
    }, tag="v1.0")
    _git("clone", "-q", "--bare", str(neox), str(mirror / "EleutherAI" / "gpt-neox.git"), cwd=tmp_path)
    return {"neox": neox, "sha": sha, "mirror": mirror, "ds_sha": ds_sha, "tmp": tmp_path}


def _line(repo: Path, sha: str, note: str) -> str:
    path, line = note.rsplit(":", 1)
    return _git("show", f"{sha}:{path}", cwd=repo).splitlines()[int(line) - 1]


def test_draft_writes_a_recipe_that_loads_cites_every_pin_and_check_refuses(setup):
    out = setup["tmp"] / "gpt-neox.yaml"
    res = envbuild("draft", setup["neox"], "--ref", "v1.0", "--git-mirror", setup["mirror"], "-o", out)
    assert res.returncode == 0, res.stderr
    assert "undecided" in res.stdout
    recipe = load_recipe(out)  # envbuild's own loader
    assert recipe.name == "gpt-neox" and recipe.published.sha == setup["sha"]
    assert recipe.resolve_as_of == "2022-03-10"
    assert recipe.python == "3.8"  # Dockerfile:4 apt-get install python3.8
    assert recipe.system_packages == ["git", "python3.8", "python3.8-dev", "pdsh"]
    pins = {p.name: p for p in recipe.packages}
    assert set(pins) == {"einops", "ftfy", "transformers", "numpy", "regex", "torch"}
    assert (pins["torch"].version, pins["torch"].cuda) == ("1.8.1", "cu111")
    for p in recipe.packages:  # every pin cites the line that states it, at the drafted commit
        assert p.source.sha == setup["sha"] and re.fullmatch(r"[\w/.-]+:\d+", p.source.note)
        assert p.name in _line(setup["neox"], setup["sha"], p.source.note)
    main, deeperspeed = recipe.sources
    assert (main.sha, main.install) == (setup["sha"], "none")
    assert (deeperspeed.name, deeperspeed.sha, deeperspeed.install) == ("deepspeed", setup["ds_sha"], "wheel")
    assert deeperspeed.requirements == ["requirements/requirements.txt"]  # followed through the mirror
    assert "DeeperSpeed" in _line(setup["neox"], setup["sha"], deeperspeed.source.note)
    fields = [u.field for u in recipe.undecided]
    assert fields == ["environment", "sources[0].build", "benchmark", "data", "targets"]
    text = out.read_text()
    assert "README.md:10: [launch] python ./deepy.py train.py" in text  # commands as comments, with lines
    assert "requirements/requirements.txt:5: -r ../../etc/shadow: outside the repository, not read" in text
    assert "requirements/requirements-dev.txt: not installed by any instruction" in text
    assert "deepspeed@" in text and ":requirements/requirements.txt:1: hjson" in text

    checked = envbuild("check", out, "--target", "local", "--json")
    assert checked.returncode == 1
    verdict = json.loads(checked.stdout)
    [undecided] = [v for v in verdict["violations"] if v["rule"] == "recipe-undecided"]
    for field in fields:
        assert f"{field} (" in undecided["message"]
    assert "recipe-undecided" in checked.stderr

    # the lock reads the dependency's requirements at its pin through the field the draft wrote
    got = source_dependencies(recipe, setup["mirror"], lambda _m: None)
    assert dict(got.requirements)["deepspeed"] == ("hjson", "ninja", "numpy", "psutil")


def test_draft_from_a_url_reads_the_bare_mirror_and_prints_json(setup):
    res = envbuild("draft", "https://github.com/EleutherAI/gpt-neox", "--ref", "v1.0",
                   "--git-mirror", setup["mirror"], "--name", "neox-125m", "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert (got["recipe"], got["commit"], got["out"]) == ("neox-125m", setup["sha"], None)
    data = yaml.safe_load(got["text"])
    assert data["published"]["url"] == "https://github.com/EleutherAI/gpt-neox"
    einops = next(p for p in data["packages"] if p["name"] == "einops")
    assert einops["source"]["url"] == (f"https://github.com/EleutherAI/gpt-neox/blob/{setup['sha']}"
                                       "/requirements/requirements.txt#L2")
    assert [u["field"] for u in got["undecided"]] == [u["field"] for u in data["undecided"]]


def test_a_dependency_without_a_mirror_is_undecided(setup):
    res = envbuild("draft", setup["neox"], "--ref", "v1.0", "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    why = {u["field"]: u["why"] for u in got["undecided"]}
    assert "no --git-mirror given" in why["sources[1].requirements"]


@pytest.mark.parametrize("args, code, needle", [
    (["https://github.com/EleutherAI/gpt-neox", "--ref", "v1.0"], 2, "pass --git-mirror DIR"),
    (["https://github.com/acme/absent", "--ref", "v1.0", "--git-mirror", "MIRROR"], 3, "no mirror of"),
    (["NEOX", "--ref", "v9.9"], 2, "ref 'v9.9' not found"),
    (["TMP", "--ref", "v1.0"], 2, "is not a git repository"),
    (["NEOX", "--ref", "v1.0", "--name", "Bad/Name"], 2, "is not a recipe name"),
])
def test_bad_input_is_named(setup, args, code, needle):
    subst = {"MIRROR": str(setup["mirror"]), "NEOX": str(setup["neox"]), "TMP": str(setup["tmp"])}
    res = envbuild("draft", *[subst.get(a, a) for a in args])
    assert res.returncode == code, res.stderr
    assert needle in res.stderr and "hint:" in res.stderr


def test_conda_setup_py_and_a_pinned_submodule(tmp_path):
    """environment.yml gives the Python and a conda environment; `pip install -e .` an editable
    install; a submodule is a source at the commit the tree pins it to."""
    apex = _commit(tmp_path / "apex", {"setup.py": "from setuptools import setup\nsetup(name='apex')\n"})
    work = tmp_path / "metaseq"
    sha = _commit(work, {
        "environment.yml": "name: ms\ndependencies:\n  - python=3.9\n  - pip:\n    - -r requirements.txt\n",
        "requirements.txt": "fairscale==0.4.1\n",
        "setup.py": "from setuptools import setup\nsetup(name='metaseq', install_requires=['hydra-core>=1.1'])\n",
        "README.md": "```bash\nconda env create -f environment.yml\npip install -e .\n```\n",
        ".gitmodules": '[submodule "apex"]\n\tpath = third_party/apex\n\turl = https://github.com/NVIDIA/apex\n',
    })
    _git("update-index", "--add", "--cacheinfo", f"160000,{apex},third_party/apex", cwd=work)
    _git("commit", "-q", "-m", "submodule", cwd=work)
    _git("tag", "v0.1", cwd=work)
    out = tmp_path / "ms.yaml"
    res = envbuild("draft", work, "--ref", "v0.1", "-o", out)
    assert res.returncode == 0, res.stderr
    recipe = load_recipe(out)
    assert recipe.published.sha != sha  # the tag's commit, the one after the first
    assert (recipe.python, recipe.environment.kind) == ("3.9", "conda")
    assert recipe.environment.source.note == "environment.yml:1"
    assert [p.name for p in recipe.packages] == ["fairscale"] and recipe.packages[0].source.note == "requirements.txt:1"
    main, sub = recipe.sources
    assert main.install == "editable" and "README.md:3: pip install -e ." in main.why
    assert (sub.name, sub.sha, sub.url, sub.install) == ("apex", apex, "https://github.com/NVIDIA/apex", "none")
    assert sub.source.note == ".gitmodules:1"
    fields = [u.field for u in recipe.undecided]
    assert "python" not in fields and "sources[1].install" in fields and "benchmark" in fields
    assert "setup.py:2: hydra-core>=1.1 (package metadata" in out.read_text()


def test_an_apex_pip_install_becomes_envbuilds_apex_install_with_its_global_options(tmp_path):
    """Dockerfile:99 of GPT-NeoX v1.0 builds Apex by `pip install --global-option=--cpp_ext
    --global-option=--cuda_ext git+https://github.com/NVIDIA/apex.git@SHA`: the draft says
    install: apex (envbuild's Apex path, whose commit the port chooses by the Apex rows) with those
    options, not a plain wheel that would build without its extensions."""
    apex_sha = "a651e2c24ecf97cbf367fd3f330df36760e1c597"
    repo = tmp_path / "neox"
    _commit(repo, {"README.md": "# x\n", "Dockerfile": DOCKERFILE + (
        "RUN pip install -v --disable-pip-version-check --no-cache-dir --global-option=\"--cpp_ext\" "
        f"--global-option=\"--cuda_ext\" git+https://github.com/NVIDIA/apex.git@{apex_sha}\n"
        "RUN pip install git+https://github.com/NVIDIA/apex-fork.git@" + "0" * 40 + "\n")}, tag="v1.0")
    res = envbuild("draft", repo, "--ref", "v1.0", "--json")
    assert res.returncode == 0, res.stderr
    sources = {s["url"]: s for s in yaml.safe_load(json.loads(res.stdout)["text"])["sources"]}
    apex = sources["https://github.com/NVIDIA/apex"]
    assert apex["install"] == "apex" and apex["build_options"] == ["--cpp_ext", "--cuda_ext"]
    assert apex["sha"] == apex_sha
    assert sources["https://github.com/NVIDIA/apex-fork"]["install"] == "wheel"  # only NVIDIA's Apex


NANOGPT_README = """\
# nanoGPT

```
pip install torch numpy transformers datasets tiktoken wandb tqdm
```

```
$ python data/shakespeare_char/prepare.py
```

This generates a few samples, for example:

```
ANGELO:
And cowards it be strawn to my bed,
And thrust the gates of my threats,
```

```
number of parameters: 123.59M
time per iteration: 78.4123ms, MFU: 41.27%
```

```
Run on the first (master) node with example IP 123.456.123.456:
$ torchrun --nproc_per_node=8 --nnodes=2 --node_rank=0 train.py
```

```python
import torch
```
"""


def test_untagged_blocks_are_shell_only_where_their_lines_are_commands(tmp_path):
    """nanoGPT's README fences its commands, its sample outputs and Shakespeare text alike
    without a language: a block is read where it uses `$ ` prompts or each line starts with a
    known program; the two of prose and output are skipped, and the draft's comments say so."""
    repo = tmp_path / "nanoGPT"
    _commit(repo, {"README.md": NANOGPT_README, "train.py": "print('train')\n"}, tag="v0")
    res = envbuild("draft", repo, "--ref", "v0", "--json")
    assert res.returncode == 0, res.stderr
    text = json.loads(res.stdout)["text"]
    comments = [line.removeprefix("#   ") for line in text.splitlines() if line.startswith("#   ")]
    read = [c for c in comments if c.startswith("README.md:")]
    assert read[:3] == [
        "README.md:4: [pip] pip install torch numpy transformers datasets tiktoken wandb tqdm",
        "README.md:8: [data] python data/shakespeare_char/prepare.py",
        "README.md:26: [launch] torchrun --nproc_per_node=8 --nnodes=2 --node_rank=0 train.py"]
    assert not any(word in text for word in ("ANGELO", "cowards", "number of parameters", "time per iteration",
                                              "Run on the first", "import torch"))
    assert "README.md: 2 code block(s) without a language skipped, their lines not commands (output or prose): " \
           "opened at line(s) 13, 19" in comments
    assert {p["name"] for p in yaml.safe_load(text)["packages"]} >= {"torch", "datasets", "wandb"}
