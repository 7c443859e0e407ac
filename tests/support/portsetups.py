"""The published setups as ``envbuild port``'s tests build them: per shipped recipe, the files of
each source that the known fixes look at, with the patterns the real trees have at their pinned
commits (and some that must stay untouched), and the fix rows those trees hold (``SETUPS``);
what port leaves undecided per recipe (``UNDECIDED``); ``mirror_repo`` lays a tree out as a bare
mirror (OWNER+NAME/repo) with one commit per ``(files, tag)``. For tests/draft_port/ and the
recipe tests that port a setup again (nanogpt)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def _git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_AUTHOR_DATE="2022-03-10T12:00:00Z",
               GIT_COMMITTER_DATE="2022-03-10T12:00:00Z")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def mirror_repo(mirror: Path, slug: str, commits: list[tuple[dict[str, str], str | None]]) -> list[str]:
    """A bare mirror of ``slug`` (OWNER/NAME) with one commit per ``(files, tag)``: its SHAs."""
    work = mirror.parent / "work" / slug.replace("/", "+")
    work.mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=work)
    shas = []
    for files, tag in commits:
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        _git("add", "-A", cwd=work)
        _git("commit", "-q", "-m", tag or "published", cwd=work)
        if tag:
            _git("tag", tag, cwd=work)
        shas.append(_git("rev-parse", "HEAD", cwd=work))
    (mirror / slug.replace("/", "+")).mkdir(parents=True)
    _git("clone", "-q", "--bare", str(work), str(mirror / slug.replace("/", "+") / "repo"), cwd=mirror)
    return shas


# -- the trees: the files the fixes look at, as the pinned commits have them ---------------------

SIX = "import torch\nfrom torch._six import inf\n"
GUARDED_SIX = "try:\n    from torch._six import inf as inf\nexcept ModuleNotFoundError:\n    from torch import inf as inf\n"
INDEXED = "dtypes = {\n    6: np.float,\n    7: np.double,\n}\nelement_sizes = {\n    np.float: 4,\n}\n"
FUSED = ("import os\n\ndef load(args):\n    cc_flag = []\n\n"
         "    def _cpp_extention_load_helper(name, sources, extra_cuda_flags):\n"
         "        return cpp_extension.load(name=name, extra_cuda_cflags=['-O3',\n"
         "                               '-gencode', 'arch=compute_70,code=sm_70',\n"
         "                               '--use_fast_math'] + extra_cuda_flags + cc_flag)\n")
MEGATRON_B31E129 = {
    "megatron/optimizer/clip_grads.py": SIX,
    "megatron/data/indexed_dataset.py": INDEXED,
    "megatron/fused_kernels/__init__.py": FUSED,
    "megatron/training.py": "if unwrapped_model.share_word_embeddings and False:\n    pass\n",
    # outside the setup's code or never started by it: left alone
    "tests/test_clip.py": SIX,
    "examples/pretrain_gpt_distributed.sh": "python -m torch.distributed.launch $DISTRIBUTED_ARGS pretrain_gpt.py\n",
}
ALPA = {
    "osdi22_artifact/megatron/benchmark_gpt.py":
        "ret = run_cmd('python3 -m torch.distributed.launch '\n             f'--nproc_per_node {n} ')\n"
        "ret = run_cmd('python3 -m torch.distributed.launch '\n             f'--nnodes {m} ')\n",
    "osdi22_artifact/megatron/benchmark_gpt_one_case.py": "import numpy as np\n",
    "benchmark/megatron/benchmark_mlp.py": "ret = run_cmd('python3 -m torch.distributed.launch ')\n",
}
ARGONNE = {
    "megatron/optimizer/clip_grads.py": GUARDED_SIX,
    "megatron/model/transformer.py": "def f():\n    if x:\n            from pkg_resources import packaging\n",
    "pretrain_gpt.py": "import torch\n",
    "ALCF/train-gpt3.sh": "#!/bin/bash\nsource ALCF/launch.sh\n",
    "ALCF/launch.sh": "#!/bin/bash\nif [[ -n \"${SLURM_JOB_ID}\" ]]; then\n  echo slurm\nfi\n",
}
MICROSOFT_MDS = {
    "megatron/optimizer/clip_grads.py": SIX,
    "megatron/data/indexed_dataset.py": INDEXED,
    "pretrain_gpt.py": "import torch\n",
    "tools/preprocess_data.py": "import json\n",
}
DEEPSPEED = [
    ({"deepspeed/runtime/utils.py": SIX, "deepspeed/autotuning/scheduler.py": "from numpy import BUFSIZE\n"}, "v0.6.3"),
    ({"deepspeed/runtime/utils.py": "from torch import inf\n",
      "deepspeed/autotuning/scheduler.py": "BUFSIZE = 1\n",
      "deepspeed/elasticity/elastic_agent.py":
          "from torch.distributed.elastic.agent.server.api import log, _get_socket_with_port\n"}, "v0.10.3"),
    ({"deepspeed/elasticity/elastic_agent.py": "from torch.distributed.elastic.utils.distributed import get_free_port\n"},
     "v0.14.4"),
]
MEGATRONAPP = {
    "run_single.sh": "#!/bin/bash\nsed -i s/x/y/ examples/megatron4.0/pretrain_gpt_distributed_small.sh\n"
                     "bash examples/megatron4.0/pretrain_gpt_distributed_small.sh\n",
    "examples/megatron4.0/pretrain_gpt_distributed_small.sh": ("cd Megatron\ntorchrun $DISTRIBUTED_ARGS pretrain_gpt.py "
                                                               "\\\n  --x\n"),
    "shm_tensor_new_rdma.cpp": "std::string ips[] = {\"10.0.0.1\", \"10.0.0.2\"}; // infiniband IPs\n"
                               "PYBIND11_MODULE(m, m) {\n  m.def(\"join_threads\", &join_threads);\n}\n",
    "setup.py": "from setuptools import setup\nargs = [\"-D_GLIBCXX_USE_CXX11_ABI=0\", \"-O3\"]\n",
    "Megatron/pretrain_gpt.py": "import torch\n",
    "Megatron/examples/pretrain_gpt.sh": "torchrun pretrain_gpt.py\n",  # not what the setup starts
    # the image's Transformer Engine, imported at module level (the node has none: a stand-in)
    "Megatron/megatron/core/transformer/custom_layers/transformer_engine.py":
        "import torch\nimport transformer_engine as te\n\nclass TELinear(te.pytorch.Linear):\n    pass\n",
    "Megatron/megatron/initialize.py": "def f():\n    import transformer_engine\n",  # inside a function: left
}
METASEQ = {
    "metaseq/data/data_utils.py": "try:\n    from collections.abc import Iterable\nexcept ImportError:\n"
                                  "    from collections import Iterable\n",
    "metaseq/dataclass/configs.py": "from dataclasses import dataclass, field\n\n@dataclass\nclass MetaseqConfig:\n"
                                    "    common: CommonConfig = CommonConfig()\n"
                                    "    dataset: DatasetConfig = DatasetConfig()\n",
    "metaseq/dataclass/initialize.py": "def hydra_init():\n    for k in keys:\n"
                                       "        v = MetaseqConfig.__dataclass_fields__[k].default\n",
    "metaseq/launcher/opt_baselines.py": "import os\n",
    "metaseq/cli/train.py": "import torch\n",
    # the pinned commit imports Megatron fairseq_v3 (in no mirror here)
    "metaseq/model_parallel/megatron_trainer.py":
        "try:\n    from megatron.mpu import get_cuda_rng_tracker\nexcept ImportError:\n    pass\n",
}
# later commits of metaseq's main: one still imports megatron, the next carries what it used
METASEQ_LATER = [
    {"metaseq/cli/train.py": "import torch\nimport os\n"},
    {"metaseq/model_parallel/megatron_trainer.py": "from metaseq.modules.megatron.mpu import get_cuda_rng_tracker\n",
     "metaseq/modules/megatron/mpu/__init__.py": "def get_cuda_rng_tracker():\n    pass\n",
     "setup.py": "extensions = [CUDAExtension(name='amp_C', sources=['metaseq/modules/apex/amp_C.cpp'])]\n",
     "tests/test_megatron.py": "from megatron import mpu\n"},  # not the setup's code (tests/)
]

# nanoGPT eba36e84: what bench.py, model.py and train.py hold that a row might look at; none is a
# fix row's pattern (the legacy TF32 switch, torch.compile, SDPA, a fused-AdamW probe, DDP)
NANOGPT = {
    "bench.py": "import torch\nfrom model import GPTConfig, GPT\nexec(open('configurator.py').read())\n"
                "torch.backends.cuda.matmul.allow_tf32 = True\nmodel = torch.compile(model) # pytorch 2.0\n",
    "model.py": "import inspect\nimport torch\n"
                "flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')\n"
                "fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters\n",
    "train.py": "from torch.nn.parallel import DistributedDataParallel as DDP\n"
                "from torch.distributed import init_process_group, destroy_process_group\n",
    "configurator.py": "from ast import literal_eval\n",
}

# recipe -> {source: (slug, files)}, and the fix rows the trees hold: (row, component, file)
UNDECIDED = {
    "alpa-megatron": set(),
    "polaris-megatron-deepspeed": {"benchmark.command"},  # ALCF's scripts: PBS (or Slurm) and a Polaris host
    "megatron-deepspeed-slurm": set(),  # sbatch: the run layout's deepspeed program on the node
    "megatronapp": {"sources[0].build"},  # the NGC image's rdma-core
    "opt-175b-azure": set(),  # Megatron fa6c0860 in no mirror: metaseq moved past it
    "nanogpt": set(),  # a plain pip install over PyPI's torch: only the stack moves
}
SETUPS = {
    "alpa-megatron": ({"megatron": ("zhisbug/Megatron-LM", MEGATRON_B31E129), "alpa": ("alpa-projects/alpa", ALPA)}, {
        ("torch-six-inf", "megatron", "megatron/optimizer/clip_grads.py"),
        ("numpy-float-alias", "megatron", "megatron/data/indexed_dataset.py"),
        ("gencode-sm70", "megatron", "megatron/fused_kernels/__init__.py"),
        ("jit-modules-by-name", "megatron", "megatron/fused_kernels/__init__.py"),
        ("launch-to-run", "alpa", "osdi22_artifact/megatron/benchmark_gpt.py")}),
    "polaris-megatron-deepspeed": ({"megatron-deepspeed": ("argonne-lcf/Megatron-DeepSpeed", ARGONNE),
                                    "ezpz": ("saforem2/ezpz", {"src/ezpz/__init__.py": "import os\n"})}, {
        ("pkg-resources-packaging", "megatron-deepspeed", "megatron/model/transformer.py")}),
    "megatron-deepspeed-slurm": ({"megatron-deepspeed": ("microsoft/Megatron-DeepSpeed", MICROSOFT_MDS),
                                  "slurm-scripts": ("woojinsoh/Megatron-DeepSpeed-Slurm",
                                                    {"megatron_ds_snmg.slurm": "#SBATCH -N 1\nsrun python pretrain_gpt.py\n"})}, {
        ("torch-six-inf", "megatron-deepspeed", "megatron/optimizer/clip_grads.py"),
        ("numpy-float-alias", "megatron-deepspeed", "megatron/data/indexed_dataset.py"),
        ("torch-six-inf", "deepspeed", "deepspeed/runtime/utils.py"),
        ("numpy-bufsize", "deepspeed", "deepspeed/autotuning/scheduler.py")}),
    "megatronapp": ({"megatronapp": ("OpenSQZ/MegatronApp", MEGATRONAPP)}, {
        ("torchrun-of-the-env", "megatronapp", "examples/megatron4.0/pretrain_gpt_distributed_small.sh"),
        ("join-threads-releases-gil", "megatronapp", "shm_tensor_new_rdma.cpp"),
        ("transformer-engine-stand-in", "megatronapp",
         "Megatron/megatron/core/transformer/custom_layers/transformer_engine.py")}),
    "opt-175b-azure": ({"metaseq": ("facebookresearch/metaseq", [METASEQ, *METASEQ_LATER]),
                        # mirrored, but without the pinned fairseq_v3 commit (as the real snapshot)
                        "megatron": ("ngoyal2707/Megatron-LM", {"megatron/__init__.py": "# master of 2019\n"}),
                        "fairscale": ("facebookresearch/fairscale", {"fairscale/__init__.py": "__version__ = '0.4.13'\n"})}, {
        ("collections-abc-import", "metaseq", "metaseq/data/data_utils.py"),
        ("dataclass-default-factory", "metaseq", "metaseq/dataclass/configs.py"),
        ("hydra-init-default-factory", "metaseq", "metaseq/dataclass/initialize.py")}),
    "nanogpt": ({"nanogpt": ("karpathy/nanoGPT", NANOGPT)}, set()),
}
