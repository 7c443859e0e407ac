"""How each recipe's published run is started on a cluster: a table of rows (data), with sources.

A recipe's ``benchmark.command`` says what the authors ran; a row here says how that run is
spread over nodes and GPUs when envbuild launches it through a scheduler:

* ``once``: the command runs once, on the first node, and starts its own ranks
  (``benchmark_gpt.py`` calls torch.distributed.launch, ``opt-baselines --local`` spawns its
  workers, ALCF's ``train-gpt3.sh`` calls mpiexec itself);
* ``deepspeed``: the DeepSpeed launcher on one node, ``--num_gpus`` = GPUs per node;
* ``torchrun``: one task per node, each a ``torchrun`` joining a c10d rendezvous on the
  first node (``--rdzv_endpoint`` = first host : port);
* ``per-node``: one task per node running the command with node-rank flags appended
  (``multi_node_args``, e.g. Alpa's ``--nnodes/--node_rank/--master_addr``);
* ``pods``: one pod per node, each with its own command (``pod_commands``: MegatronApp's
  ``run_master.sh`` / ``run_worker.sh``).

Programs and arguments are argv words (data, quoted when rendered); ``{cwd}`` and
``{job_dir}`` are filled with the run's working folder and the job's output folder. In commands
that the renderer itself writes, ``$ENVBUILD_NNODES``, ``$ENVBUILD_NODE_RANK``,
``$ENVBUILD_MASTER_ADDR``, ``$ENVBUILD_MASTER_PORT``, ``$ENVBUILD_GPUS_PER_NODE`` and
``$ENVBUILD_JOB_ID`` are set by each scheduler's script (``envbuild.launch.job``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

Launcher = Literal["once", "deepspeed", "torchrun", "per-node", "pods"]


@dataclass(frozen=True)
class Program:
    """How one recipe variant runs on a cluster (``variant`` None: the default benchmark)."""

    recipe: str
    variant: str | None
    launcher: Launcher
    argv: tuple[str, ...] = ()  # program and arguments; empty: the recipe's benchmark command
    nodes: int = 1  # default node count
    min_nodes: int = 1
    max_nodes: int | None = 1  # None: any
    gpus_per_node: int | None = None  # fixed by the published command; None: target/option
    total_gpus: tuple[int, ...] = ()  # the GPU counts the program has a configuration for
    gpu_multiple: int = 1  # total GPUs must be a multiple (tensor x pipeline parallel size)
    cpus_per_task: int | None = None
    multi_node_args: tuple[str, ...] = ()  # appended to the command when nodes > 1 (per-node)
    pod_commands: tuple[str, ...] = ()  # pods: the recipe variant each pod runs, by node rank
    files: dict[str, str] = field(default_factory=dict)  # job-folder files written before start
    scheduler_options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    master_port: int | None = None  # the port the published scripts fix for the first node
    # a variable each node fills at start with every rank's InfiniBand address, across nodes
    # (envbuild/node/ib_addresses.py), for a program that reads its ranks' addresses from it
    address_var: str | None = None
    source: str = ""
    why: str = ""


MDS_SCRIPTS = "woojinsoh/Megatron-DeepSpeed-Slurm@1b53975055fa7275c7c0786d98e180bafc5047ee"

# megatron_ds_snmg.slurm / megatron_ds_mnmg.slurm: "Debug model" options and DeepSpeed options,
# word for word; only the tensor/pipeline sizes differ (TP 4, PP 1 single node; PP 2 multi-node).
_MDS_ARGS = (
    "--num-layers", "8", "--hidden-size", "512", "--num-attention-heads", "32",
    "--seq-length", "1024", "--loss-scale", "12", "--max-position-embeddings", "1024",
    "--micro-batch-size", "4", "--global-batch-size", "128", "--train-iters", "1000",
    "--lr", "6.0e-5", "--min-lr", "6.0e-6", "--lr-decay-style", "cosine", "--log-interval", "1",
    "--eval-iters", "40", "--eval-interval", "1000", "--data-path", "{cwd}/my-gpt2_text_document",
    "--vocab-file", "{cwd}/gpt2-vocab.json", "--merge-file", "{cwd}/gpt2-merges.txt",
    "--save-interval", "1000", "--split", "98,2,0", "--clip-grad", "1.0", "--weight-decay", "0.1",
    "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--init-method-std", "0.006", "--fp16",
    "--checkpoint-activations", "--distributed-backend", "nccl",
    "--deepspeed", "--deepspeed-activation-checkpointing", "--deepspeed_config={job_dir}/ds_config.json",
    "--zero-stage=1",
)
_MDS_DS_CONFIG = json.dumps({
    "train_batch_size": 128, "train_micro_batch_size_per_gpu": 4, "steps_per_print": 1,
    "zero_optimization": {"stage": 1}, "gradient_clipping": 1.0, "prescale_gradients": False,
    "fp16": {"enabled": True, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2,
             "min_loss_scale": 1, "initial_scale_power": 12},
    "wall_clock_breakdown": True}, indent=2) + "\n"

# Alpa's benchmark_gpt.py has one configuration per total GPU count (gpt_megatron_best_suite);
# any other count prints "No available benchmark suite" and exits 0 without a result.
_ALPA_SOURCE = ("alpa-projects/alpa@e0ae8bf849ead61e65197cbeb24ce6435712e170:"
                "osdi22_artifact/megatron/benchmark_gpt.py")
_ALPA_MULTI = ("--nnodes", "$ENVBUILD_NNODES", "--node_rank", "$ENVBUILD_NODE_RANK",
               "--master_addr", "$ENVBUILD_MASTER_ADDR", "--master_port", "$ENVBUILD_MASTER_PORT")

PROGRAMS: tuple[Program, ...] = (
    Program("megatron-deepspeed-slurm", None, "deepspeed", ("{cwd}/pretrain_gpt.py", *_MDS_ARGS,
            "--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "1"),
            gpu_multiple=4, cpus_per_task=16, files={"ds_config.json": _MDS_DS_CONFIG},
            source=f"{MDS_SCRIPTS}:megatron_ds_snmg.slurm",
            why="the single-node script: 1 node, 1 task, 16 CPUs, deepspeed --num_gpus 8 (the "
                "node's GPUs), TP 4 x PP 1; ds_config.json written by the job as the script does"),
    Program("megatron-deepspeed-slurm", "multi-node", "torchrun", ("{cwd}/pretrain_gpt.py", *_MDS_ARGS,
            "--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "2"),
            nodes=2, min_nodes=2, max_nodes=None, gpu_multiple=8, cpus_per_task=16,
            files={"ds_config.json": _MDS_DS_CONFIG},
            source=f"{MDS_SCRIPTS}:megatron_ds_mnmg.slurm",
            why="the multi-node script: >= 2 nodes (it exits below 2), one torchrun per node, "
                "c10d rendezvous on the first host at port 49152 + job id % 16384, TP 4 x PP 2"),
    Program("alpa-megatron", None, "once", gpus_per_node=1, total_gpus=(1,), source=_ALPA_SOURCE,
            why="benchmark_gpt.py --nproc_per_node 1 starts torch.distributed.launch itself"),
    Program("alpa-megatron", "4gpu", "once", gpus_per_node=4, total_gpus=(4,), source=_ALPA_SOURCE,
            why="benchmark_gpt.py --nproc_per_node 4 on one node"),
    Program("alpa-megatron", "8gpu", "per-node", gpus_per_node=8, max_nodes=4, total_gpus=(8, 16, 32),
            multi_node_args=_ALPA_MULTI, source=_ALPA_SOURCE,
            why="benchmark_gpt.py --nproc_per_node 8; across nodes it takes --nnodes, --node_rank, "
                "--master_addr and --master_port (its multi-node branch), suites for 16 and 32 GPUs"),
    Program("opt-175b-azure", None, "once", gpus_per_node=8,
            source="facebookresearch/metaseq@a1a4e733d27898056fe08fb8f6a1fa6af06ca55a:"
                   "metaseq/launcher/opt_baselines.py",
            why="opt-baselines --local --num-gpus 8 --num-nodes 1 runs its workers on this node; "
                "more nodes would make it submit its own sbatch jobs"),
    Program("polaris-megatron-deepspeed", None, "once", max_nodes=None,
            scheduler_options={"pbs": ("-l filesystems=home:eagle", "-l place=scatter")},
            source="argonne-lcf/Megatron-DeepSpeed@e4bac7019db92cfe49d6eeac00b5721652e516fe:"
                   "ALCF/train-gpt3.sh, ALCF/launch.sh, ALCF/args.sh",
            why="train-gpt3.sh calls mpiexec itself (--hostfile $PBS_NODEFILE, --ppn = the GPUs "
                "nvidia-smi lists); its data lie on /lus/eagle, hence filesystems=home:eagle"),
    Program("megatronapp", None, "once", gpus_per_node=4,
            source="OpenSQZ/MegatronApp@1bed2a7202162d6eb2725e9769632a682021a6fb:run_single.sh",
            why="run_single.sh: one pod, torchrun over its 4 GPUs (PP 4, 4 model chunks)"),
    Program("megatronapp", "two-pods", "pods", nodes=2, min_nodes=2, max_nodes=2, gpus_per_node=4,
            pod_commands=("two-pods-master", "two-pods-worker"), master_port=6000,
            address_var="MEGATRONAPP_IB_ADDRESSES",  # the recipe's ib-addresses patch reads it
            source="OpenSQZ/MegatronApp@1bed2a7202162d6eb2725e9769632a682021a6fb:run_master.sh, "
                   "run_worker.sh, examples/megatron4.0/pretrain_gpt_distributed_small.sh",
            why="master (NODE_RANK 0) and worker (NODE_RANK 1) pods of 4 GPUs each; the training "
                "script hard-codes MASTER_ADDR, so envbuild writes the first pod's name into it "
                "in both pods before run_master.sh / run_worker.sh"),
    Program("cpu-reference", None, "once", source="envbuild/smoke/gpt.py",
            why="envbuild's own GPT smoke, one process"),
)

MEGATRONAPP_MASTER_ADDR = ('sed -i "s/^MASTER_ADDR=.*/MASTER_ADDR=$ENVBUILD_MASTER_ADDR/" '
                           "examples/megatron4.0/pretrain_gpt_distributed_small.sh")


def program(recipe: str, variant: str | None) -> Program | None:
    """The row for ``recipe`` and ``variant`` (None when the table has none)."""
    return next((p for p in PROGRAMS if p.recipe == recipe and p.variant == variant), None)


def variants(recipe: str) -> list[str]:
    """Launch variants the table adds beyond the recipe's own (``two-pods``)."""
    return [p.variant for p in PROGRAMS if p.recipe == recipe and p.variant and p.launcher == "pods"]
