"""envbuild draft's pure parsers, on text shaped like the files of published setups (GPT-NeoX's
requirements tree with -r, a DeeperSpeed-like setup.py, an environment.yml, a Dockerfile with
ARG/FROM/pip/apt, a README with fenced blocks): each row at its own line."""

from __future__ import annotations

from envbuild.draft import (
    condaenv,
    dockerfile,
    gitmodules,
    pyproject,
    readme,
    requirements,
    setupcfg,
    setuppy,
)
from envbuild.draft.cite import inside
from envbuild.draft.pipcmd import looks_like_command
from envbuild.draft.requirements import Vcs, vcs_requirement

NEOX_REQUIREMENTS = """\
git+https://github.com/EleutherAI/DeeperSpeed.git@eb7f5cff36678625d23db8a8fe78b4a93e5d2c75#egg=deepspeed
einops==0.3.0
ftfy==6.0.1  # text cleaning
lm_dataformat==0.0.20
-r requirements-base.txt
-c ../../etc/constraints.txt
numpy==1.22.0
--find-links https://download.pytorch.org/whl/torch_stable.html
transformers~=4.16.0 ; python_version >= "3.7"
six \\
    >=1.15
-e .
"""


def test_requirements_rows_keep_lines_includes_options_and_vcs():
    rows = requirements.parse(NEOX_REQUIREMENTS)
    got = [(r.line, r.kind, r.target) for r in rows]
    assert got[0][:2] == (1, "vcs")
    assert rows[0].vcs == Vcs("deepspeed", "https://github.com/EleutherAI/DeeperSpeed",
                              "eb7f5cff36678625d23db8a8fe78b4a93e5d2c75")
    assert (3, "requirement", "ftfy==6.0.1") in got  # the comment is cut
    assert (5, "include", "requirements-base.txt") in got
    assert (6, "constraint", "../../etc/constraints.txt") in got
    assert (8, "option", "--find-links https://download.pytorch.org/whl/torch_stable.html") in got
    assert (9, "requirement", 'transformers~=4.16.0 ; python_version >= "3.7"') in got
    assert (10, "requirement", "six >=1.15") in got  # a continued line, at its first line
    assert (12, "editable", ".") in got


def test_vcs_requirement_forms():
    assert vcs_requirement("enrich @ git+https://github.com/saforem2/enrich") == \
        Vcs("enrich", "https://github.com/saforem2/enrich", None)
    assert vcs_requirement("git+ssh://git@github.com/o/r.git@v1.2#egg=r&subdirectory=x") == \
        Vcs("r", "ssh://git@github.com/o/r", "v1.2")
    assert vcs_requirement("torch==1.8.1") is None


def test_includes_stay_inside_the_repository():
    assert inside("requirements/requirements.txt", "requirements-base.txt") == "requirements/requirements-base.txt"
    assert inside("requirements/requirements.txt", "../requirements.txt") == "requirements.txt"
    assert inside("requirements/requirements.txt", "../../etc/passwd") is None
    assert inside("requirements.txt", "/etc/passwd") is None


DEEPERSPEED_SETUP = '''\
import os
from setuptools import setup, find_packages

def fetch_requirements(path):
    with open(path, 'r') as fd:
        return [r.strip() for r in fd.readlines()]

install_requires = fetch_requirements('requirements/requirements.txt')
extras_require = {'1bit': fetch_requirements('requirements/requirements-1bit.txt')}

setup(name='deepspeed',
      install_requires=install_requires,
      python_requires=">=3.6")
'''

LITERAL_SETUP = '''\
from setuptools import setup
REQS = [
    "hydra-core>=1.1.0,<1.2",
    'dataclasses; python_version<"3.7"',
]
setup(name="metaseq", install_requires=REQS, python_requires=">=3.8")
'''


def test_setup_py_literals_with_lines_and_computed_lists_as_notes():
    lit = setuppy.parse(LITERAL_SETUP)
    assert [(r.line, r.text) for r in lit.requires] == [(3, "hydra-core>=1.1.0,<1.2"), (4, 'dataclasses; python_version<"3.7"')]
    assert lit.python.text == ">=3.8" and lit.notes == ()
    computed = setuppy.parse(DEEPERSPEED_SETUP)
    assert computed.requires == () and computed.python.line == 13
    assert "install_requires is computed" in computed.notes[0]
    assert "requirements/requirements.txt" in computed.notes[0]
    assert setuppy.named_requirement_files(DEEPERSPEED_SETUP) == ["requirements/requirements.txt"]
    assert "does not parse" in setuppy.parse("setup(:\n").notes[0]


def test_setup_cfg_and_pyproject_with_lines():
    cfg = setupcfg.parse("[metadata]\nname = x\n\n[options]\npackages = find:\ninstall_requires =\n"
                         "    torch>=1.8  # cuda\n    regex\npython_requires = >=3.8\n[options.extras_require]\n"
                         "dev = pytest\n")
    assert [(r.line, r.text) for r in cfg.requires] == [(7, "torch>=1.8"), (8, "regex")]
    assert (cfg.python.line, cfg.python.text) == (9, ">=3.8")
    pp = pyproject.parse('[build-system]\nrequires = ["torch"]\n\n[project]\nname = "ezpz"\n'
                         'requires-python = ">=3.9"\ndependencies = [\n    "torch",\n    "rich>=13",\n]\n')
    assert [(r.line, r.text) for r in pp.requires] == [(8, "torch"), (9, "rich>=13")]  # not build-system's line 2
    dyn = pyproject.parse('[project]\nname = "x"\ndynamic = ["dependencies"]\n')
    assert dyn.requires == () and "dynamic" in dyn.notes[0]


ENVIRONMENT_YML = """\
name: gpt-neox
channels:
  - pytorch
  - conda-forge
dependencies:
  - python=3.8.10
  - cudatoolkit=11.1
  - pip
  - pip:
    - -r requirements/requirements.txt
    - einops==0.3.0
"""


def test_environment_yml_python_conda_and_pip_lines():
    env = condaenv.parse(ENVIRONMENT_YML)
    assert (env.python.line, env.python.text) == (6, "3.8")
    assert [(r.line, r.text) for r in env.conda] == [(7, "cudatoolkit=11.1"), (8, "pip")]
    assert [(r.line, r.text) for r in env.pip] == [(10, "-r requirements/requirements.txt"), (11, "einops==0.3.0")]
    assert env.channels == ("pytorch", "conda-forge")
    assert "not read" in condaenv.parse("dependencies: [\n").notes[0]


NEOX_DOCKERFILE = """\
# syntax=docker/dockerfile:1
ARG CUDA_VERSION=11.1.1
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu20.04

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -y && \\
    apt-get install -y \\
        git python3.8 python3.8-dev \\
        libpython3.8-dev pdsh && \\
    python3 -m pip install --upgrade pip

# the pinned torch wheel
RUN pip install torch==1.8.1+cu111 -f https://download.pytorch.org/whl/torch_stable.html
COPY requirements/ /requirements
RUN pip install -r /requirements/requirements.txt && \\
    pip install -r /requirements/requirements-onebitadam.txt
"""


def test_dockerfile_from_arg_pip_and_apt_at_their_lines():
    d = dockerfile.parse(NEOX_DOCKERFILE)
    assert [(f.line, f.written, f.image) for f in d.froms] == [
        (3, "nvidia/cuda:${CUDA_VERSION}-devel-ubuntu20.04", "nvidia/cuda:11.1.1-devel-ubuntu20.04")]
    assert [(a.line, a.text) for a in d.args] == [(2, "CUDA_VERSION=11.1.1")]
    kinds = [(line, c.kind) for line, c in d.commands]
    assert kinds == [(6, "other"), (7, "apt"), (10, "pip"), (13, "pip"), (15, "pip"), (16, "pip")]
    apt = d.commands[1][1]
    assert apt.packages == ("git", "python3.8", "python3.8-dev", "libpython3.8-dev", "pdsh")
    torch = d.commands[3][1].pip
    assert torch.requirements == ("torch==1.8.1+cu111",)
    assert torch.options == ("-f https://download.pytorch.org/whl/torch_stable.html",)
    assert d.commands[4][1].pip.files == ("/requirements/requirements.txt",)


NEOX_README = """\
# GPT-NeoX

## Quick start

```bash
pip install -r requirements/requirements.txt
python ./megatron/fused_kernels/setup.py install # optional if not using fused kernels
```

Then:

```python
import torch  # not a shell block
```

```console
$ python prepare_data.py -d ./data
downloading enwik8...
$ python ./deepy.py train.py -d configs 125M.yml local_setup.yml \\
    --seed 1
```

~~~sh
git submodule update --init && pip install -e .
~~~
"""


def test_readme_fenced_shell_commands_classified_at_their_lines():
    rows = [(r.line, r.command.kind, r.command.text) for r in readme.parse(NEOX_README)]
    assert rows == [
        (6, "pip", "pip install -r requirements/requirements.txt"),
        (7, "setup", "python ./megatron/fused_kernels/setup.py install"),
        (17, "data", "python prepare_data.py -d ./data"),
        (19, "launch", "python ./deepy.py train.py -d configs 125M.yml local_setup.yml --seed 1"),
        (24, "other", "git submodule update --init"),
        (24, "pip", "pip install -e ."),
    ]


def test_an_untagged_block_is_shell_only_where_its_lines_are_commands():
    """A block without a language: read with `$ ` prompts (the lines without one are output) or
    where every command line starts with a known program (continuations joined); sample output
    and prose are skipped and counted by the line of their opening fence."""
    text = ("```\ngit clone https://github.com/karpathy/nanoGPT && cd nanoGPT\n./run.sh \\\n  --gpus 8\n```\n"
            "```\nANGELO:\nAnd cowards it be strawn to my bed,\n```\n"
            "```\n$ python sample.py\nTHEODORE:\n```\n"
            "~~~\nCUDA_VISIBLE_DEVICES=0 python bench.py\nstep 0: loss 10.99\n~~~\n"
            "```text\npip install torch\n```\n")
    got = readme.read(text)
    assert [(r.line, r.command.kind, r.command.text) for r in got.commands] == [
        (2, "other", "git clone https://github.com/karpathy/nanoGPT"), (2, "other", "cd nanoGPT"),
        (3, "other", "./run.sh --gpus 8"), (11, "other", "python sample.py")]
    assert got.skipped == (6, 14)  # a labelled block that is not a shell (text) is not counted
    assert [looks_like_command(t) for t in ("$ ls", "FOO=1", "python3.11 -m pip list", "scripts/train.py",
                                             "time per iteration: 78ms", "Thou shalt sell me")] == [
        True, True, True, True, False, False]


def test_gitmodules_sections():
    subs = gitmodules.parse('[submodule "megatron"]\n\tpath = third_party/Megatron-LM\n'
                            '\turl = https://github.com/NVIDIA/Megatron-LM.git\n\tbranch = main\n'
                            '[submodule "apex"]\n\tpath = apex\n\turl = https://github.com/NVIDIA/apex\n')
    assert [(s.line, s.name, s.path, s.branch) for s in subs] == [
        (1, "megatron", "third_party/Megatron-LM", "main"), (5, "apex", "apex", None)]


def test_module_examples_hold():
    """The examples in the parsers' docstrings are what they return."""
    import doctest
    import importlib

    for name in ("cite", "requirements", "pipcmd", "setuppy", "setupcfg", "pyproject", "condaenv", "dockerfile",
                 "readme", "gitmodules", "survey"):
        module = importlib.import_module(f"envbuild.draft.{name}")
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, name
