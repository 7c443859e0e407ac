"""Rows about the node and the target: interpreters, glibc, IB, container runtime, scheduler, GPUs."""

from __future__ import annotations

from envbuild.compat.context import Context
from envbuild.compat.rule import Rule
from envbuild.versions import vtuple

RDMA_PACKAGES = ("libibverbs", "librdmacm", "rdma-core", "perftest", "ibverbs")


def _python_absent(ctx: Context) -> str | None:
    env = ctx.recipe.environment
    if ctx.container or env.kind == "module-venv" or ctx.facts.python(ctx.recipe.python):
        return None
    if ctx.facts.conda or ctx.target.conda_modules:
        return None  # conda can create it
    have = ", ".join(p.version for p in ctx.facts.pythons) or "none"
    return (f"Python {ctx.recipe.python} is not on {ctx.facts.host} (found: {have}) and there is no "
            f"conda/mamba to create it")


def _conda_module(ctx: Context) -> str | None:
    mod = ctx.recipe.environment.conda_module
    if not mod or mod in ctx.facts.modules or mod in ctx.target.conda_modules:
        return None
    return f"environment module {mod} is not available on {ctx.facts.host}"


def _glibc(ctx: Context) -> str | None:
    t = ctx.torch
    g = ctx.facts.glibc
    if not t or not t.row or not t.row.glibc or not g or ctx.container or t.package.preinstalled:
        return None
    if vtuple(g) >= vtuple(t.row.glibc):
        return None
    return f"torch {t.label} needs glibc >= {t.row.glibc}; {ctx.facts.host} has glibc {g}"


def _uses_rdma(ctx: Context) -> list[str]:
    hits = [p for p in ctx.recipe.system_packages if any(r in p for r in RDMA_PACKAGES)]
    hits += [s.name for s in ctx.recipe.sources if "megatronapp" in (s.name + s.url).lower()]
    return hits


def _one_node(ctx: Context) -> bool:
    """Every published command of the recipe runs on one node (its ``run`` layouts say so):
    MegatronApp's extension then takes only its shared-memory paths (the RDMA calls run only
    between ranks of different addresses, OpenSQZ/MegatronApp@1bed2a72:shm_tensor_new_rdma.cpp:218,268),
    and its libraries load without an InfiniBand device."""
    runs = ctx.recipe.run.values()
    return bool(runs) and all(r.nodes == 1 and r.max_nodes == 1 for r in runs)


def _rdma(ctx: Context) -> str | None:
    hits = _uses_rdma(ctx)
    if not hits or ctx.facts.infiniband or _one_node(ctx):
        return None
    return (f"the recipe builds/uses RDMA ({', '.join(hits)}) but {ctx.facts.host} shows no "
            f"InfiniBand device")


def _runtime(ctx: Context) -> str | None:
    if not ctx.container or ctx.facts.container_engines:
        return None
    image = ctx.recipe.environment.base_image or "a container image"
    return f"the recipe runs in {image} but {ctx.facts.host} has no container runtime"


SCHEDULED = ("slurm", "pbs", "kubernetes")


def _scheduler(ctx: Context) -> str | None:
    want = ctx.recipe.launcher
    if want not in SCHEDULED or ctx.target.scheduler == want:
        return None
    return f"the recipe launches with {want}, but target {ctx.target.name} has scheduler {ctx.target.scheduler}"


def profile_gpus(origin: str) -> bool:
    """Whether facts of ``origin`` count the target profile's GPUs rather than a node's: the
    profile itself (``profile:T``) or an image built for the target (``image:B+profile:T``,
    ``envbuild.plan.image.image_facts``), which runs on any machine of the type. `check`,
    `plan` and `render` then judge one count (issue 49: `render` refused what `check` passed)."""
    return origin.startswith("profile:") or (origin.startswith("image:") and "+profile:" in origin)


def _gpus(ctx: Context) -> str | None:
    b = ctx.recipe.benchmark
    have = len(ctx.facts.gpus)
    if profile_gpus(ctx.facts.origin) and ctx.target.lent_gpu_counts:
        # the profile's own count is one machine of the type; it is also lent with more cards
        have = max(have, *ctx.target.lent_gpu_counts)
    if not b or b.needs_gpus <= have:
        return None
    return f"the benchmark needs {b.needs_gpus} GPU(s) per node; {ctx.facts.host} has {len(ctx.facts.gpus)}"


def _resources(ctx: Context) -> str | None:
    """The recipe's expected use (``Recipe.resources``) against the node: GPU memory per GPU and
    host memory, where both are stated and known; a smoke's or benchmark's only on a node with
    GPUs (a CPU node provisions and runs the CPU smoke, not the GPU experiment)."""
    gib = [g.memory_mib / 1024 for g in ctx.facts.gpus if g.memory_mib]
    short = []
    for r in ctx.recipe.resources:
        if r.experiment != "provision" and not ctx.facts.gpus:
            continue
        if r.gpu_memory_gib and gib and min(gib) < r.gpu_memory_gib:
            short.append(f"{r.experiment}: {r.gpu_memory_gib:g} GiB per GPU expected, {min(gib):.0f} GiB on "
                         f"{ctx.facts.host} ({r.basis}: {r.source})")
        if ctx.facts.memory_gib and ctx.facts.memory_gib < r.host_memory_gib:
            short.append(f"{r.experiment}: {r.host_memory_gib:g} GiB of host memory expected, "
                         f"{ctx.facts.memory_gib:.0f} GiB on {ctx.facts.host} ({r.basis}: {r.source})")
    return "; ".join(short) or None


RULES: list[Rule] = [
    Rule("python-absent", "error", "the recipe's Python is not on the node and cannot be created",
         "venvs are made from an existing interpreter; without conda/mamba envbuild cannot fetch one",
         "https://docs.python.org/3/library/venv.html", "install pythonX.Y on the node (deadsnakes, "
         "pyenv) or provide conda/micromamba", _python_absent),
    Rule("conda-module-absent", "error", "the recipe's environment module is not on the node",
         "module-venv recipes build on a site conda module (e.g. ALCF conda/2023-10-04)",
         "https://github.com/argonne-lcf/conda_install_scripts", "run on the site that provides the "
         "module, or use a recipe variant with a venv", _conda_module),
    Rule("glibc-too-old", "error", "the node's glibc is older than the pinned wheel's platform tag",
         "a manylinux wheel needs at least its tag's glibc (manylinux2014 = 2.17, manylinux_2_28 = 2.28)",
         "https://peps.python.org/pep-0600/", "use an older wheel or a container with a newer glibc",
         _glibc),
    Rule("rdma-needs-infiniband", "error", "the recipe's RDMA code needs InfiniBand/libibverbs",
         "MegatronApp's shm_tensor_new_rdma extension links ibverbs/rdmacm and opens IB connections",
         "OpenSQZ/MegatronApp@1bed2a72:setup.py", "run on nodes with IB (UseIB) or drop the RDMA path",
         _rdma),
    Rule("container-runtime-missing", "error", "a container recipe on a node without a container runtime",
         "the environment is an image; podman/docker/enroot/apptainer must run it", "shared/docs/PINS.md",
         "install podman/docker (or enroot+pyxis on Slurm) on the node", _runtime),
    Rule("scheduler-mismatch", "error", "the recipe's launcher is not the target's scheduler",
         "the published scripts submit with their scheduler (PBS mpiexec on Polaris, srun/pyxis on Slurm)",
         "shared/docs/PINS.md", "pick a target with that scheduler, or a recipe variant with another "
         "launcher", _scheduler),
    Rule("too-few-gpus", "error", "the node has fewer GPUs than the benchmark needs",
         "the recipe's benchmark launches one rank per GPU of a node and says how many it needs "
         "(benchmark.needs_gpus, each recipe citing its published command)",
         "envbuild/recipes/schema.py (Benchmark.needs_gpus)",
         "run on a node with enough GPUs or lower the benchmark's GPU count", _gpus),
    Rule("resources-exceed-node", "warning", "the node has less memory than the recipe expects to use",
         "a recipe states its expected use per experiment (GPUs, GPU memory, host memory, disk, network, "
         "time), as artifact checklists ask; a node below it may run out of memory",
         "envbuild/recipes/schema.py (Recipe.resources)",
         "run on a node with more memory, or lower the experiment's size", _resources),
]
