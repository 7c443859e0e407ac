"""Target profiles: what a class of node looks like, as data.

A profile gives what envbuild must assume when no live facts are available (lock and plan
from a laptop), and what it refines when facts arrive (``envbuild facts``).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from envbuild.names import EnvName, EnvValue, Name

# a project or queue name as a scheduler directive holds it (``#PBS -A x``, ``#SBATCH --partition=x``)
JobWord = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.,@+-]*$")]


class Strict(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class GpuSpec(Strict):
    model: str
    count: int
    compute_capability: str  # "8.0"
    memory_gib: int
    interconnect: str | None = None  # NVLink, PCIe


class CudaSpec(Strict):
    toolkit: str | None = None  # nvcc version on the node, "11.4"; None = no toolkit
    driver: str | None = None  # driver version, "470.82.01"
    driver_cuda: str | None = None  # highest CUDA the driver supports, "11.4"


class Platform(Strict):
    os_id: str = "ubuntu"
    os_version: str = "20.04"
    glibc: str = "2.31"
    arch: Literal["x86_64", "aarch64"] = "x86_64"


DNS_LABEL = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"  # a Kubernetes name (RFC 1123 label)
DnsLabel = Annotated[str, StringConstraints(pattern=DNS_LABEL)]
WALLTIME = r"^\d{1,3}:[0-5]\d:[0-5]\d$"  # HH:MM:SS (hours may pass 99: 168:00:00)


class Queue(Strict):
    """One queue (partition) of a site, as its user guide states its limits."""

    name: JobWord
    min_nodes: int = Field(default=1, ge=1)
    max_nodes: int | None = Field(default=None, ge=1)
    max_walltime: Annotated[str, StringConstraints(pattern=WALLTIME)] | None = None
    note: str = ""


class Jobs(Strict):
    """How jobs are submitted on this target: what its scheduler requires of every job, and an
    operator's defaults. Read by ``envbuild launch`` (flags win, then these defaults); where a
    required value is still missing, launch refuses and names the flag that gives it.

    Not part of the lock's target digest (``Target.DIGEST_EXCLUDE``): it says how jobs are
    submitted, not what the environment is, so setting an account does not make a lock stale.

    Example, in your own copy of a shipped target::

        jobs:
          requires: [account, queue]   # qsub refuses a job without -A and -q
          account: MYPROJECT           # --account, #PBS -A / #SBATCH --account
          queue: debug                 # --partition, #PBS -q / #SBATCH --partition
          source: "https://docs.alcf.anl.gov/polaris/running-jobs/"
    """

    requires: list[Literal["account", "queue"]] = Field(default_factory=list)
    account: JobWord | None = None  # the project (PBS -A) or Slurm account
    queue: JobWord | None = None  # the PBS queue (-q) or Slurm partition
    source: str = ""  # where the site says what it requires
    # the site's queues and what each accepts (envbuild.launch.queues): a job that does not fit
    # the queue it names is warned of; one that does not fit the profile's default queue goes to
    # the first listed queue it fits
    queues: list[Queue] = Field(default_factory=list)
    # Kubernetes (envbuild.launch.k8s): where the pods run and what the cluster calls things
    namespace: DnsLabel | None = None  # else "envbuild" (never the shared "default")
    kueue_queue: DnsLabel | None = None  # a Kueue LocalQueue: the kueue.x-k8s.io/queue-name label
    rdma_resource: Annotated[str, StringConstraints(pattern=r"^[a-z0-9.-]+/[A-Za-z0-9_.-]+$")] | None = None
    gpu_product: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")] | None = None
    ipc_lock: bool = False  # add IPC_LOCK (RDMA registration): the namespace must allow "privileged"
    ttl_after_finished_s: int = Field(default=86400, ge=0)  # a finished Job (and its logs) kept a day


# the facts of a profile that a source must back (``Target.fact_sources``): where the guide's
# own cluster files say them (OS image, CUDA, driver, GPUs), or where they were read on a node
FACT_FIELDS = ("image", "platform.os_id", "platform.os_version", "platform.glibc", "gpus.model",
               "gpus.count", "gpus.compute_capability", "gpus.memory_gib", "cuda.toolkit", "cuda.driver",
               "cuda.driver_cuda", "python")


class Target(Strict):
    """One class of node (a VM type, a cluster, a pod shape).

    ``fact_sources`` names where each fact of ``FACT_FIELDS`` the profile sets was read
    (``owner/repo@sha:path (what it says)``, a release-notes URL, or a captured node file), and
    marks an inference as one; ``image`` is the OS, VM or container image those facts are of.
    Neither is part of the lock's target digest: they say where the facts come from, not what
    the node is.
    """

    schema_: int = Field(alias="schema")
    name: Name  # becomes a path (lockfiles/<recipe>/<name>.lock): one lower-case component
    title: str
    description: str = ""
    platform: Platform = Platform()
    gpus: GpuSpec | None = None  # None: CPU-only
    cuda: CudaSpec = CudaSpec()
    cpu_cores: int | None = None
    memory_gib: int | None = None
    python: list[str] = Field(default_factory=list)  # interpreters a node offers (e.g. "3.8")
    scheduler: Literal["none", "slurm", "pbs", "kubernetes"] = "none"
    infiniband: bool = False
    container_runtime: str | None = None
    shm_size: str | None = None
    conda_modules: list[str] = Field(default_factory=list)
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)  # NCCL/UCX variables for this node type
    files: dict[str, str] = Field(default_factory=dict)  # e.g. NCCL_TOPO_FILE path -> why
    cache_dir: str | None = None  # where pip/build caches go (/mnt on Azure)
    from_facts: bool = False  # "local": everything comes from live facts
    sources: list[str] = Field(default_factory=list)
    image: str | None = None  # the OS / VM / container image the facts are those of
    fact_sources: dict[str, str] = Field(default_factory=dict)  # FACT_FIELDS entry -> where it is read
    jobs: Jobs = Jobs()
    # the GPU counts this node type is lent with (one card or several of one host): a check
    # against the profile (no live facts) refuses a benchmark only beyond the largest; a
    # node's own facts always give its real count
    lent_gpu_counts: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)
    # the prefix lies on a file system every node of this type mounts (NFS, Lustre, GPFS: the
    # usual layout at HPC sites): one node installs it, the others check it and use it, and
    # the lock on the prefix itself keeps nodes and controllers apart (envbuild.provision.shared)
    shared_prefix: bool = False

    # fields left out of ``catalog.digest`` (what a lock records of its target): how jobs are
    # submitted, where the facts were read, how many cards a machine of this type may have and
    # whether its prefix is shared, not the environment a lock is made for
    DIGEST_EXCLUDE: ClassVar[frozenset[str]] = frozenset({"jobs", "image", "fact_sources", "lent_gpu_counts",
                                                          "shared_prefix"})

    @field_validator("fact_sources")
    @classmethod
    def _known_facts(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(FACT_FIELDS))
        if unknown:
            raise ValueError(f"fact_sources names {', '.join(unknown)}: not a fact of a profile "
                             f"(one of {', '.join(FACT_FIELDS)})")
        empty = sorted(k for k, text in v.items() if not text.strip())
        if empty:
            raise ValueError(f"fact_sources gives no source for {', '.join(empty)}")
        return v

    def fact(self, field: str) -> object:
        """The value of one of ``FACT_FIELDS`` (None where the profile leaves it open)."""
        value: object = self
        for part in field.split("."):
            value = getattr(value, part, None) if value is not None else None
        return value or None

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)
