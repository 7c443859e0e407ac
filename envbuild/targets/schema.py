"""Target profiles: what a class of node looks like, as data.

A profile gives what envbuild must assume when no live facts are available (lock and plan
from a laptop), and what it refines when facts arrive (``envbuild facts``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from envbuild.names import EnvName, Name


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class Target(Strict):
    """One class of node (a VM type, a cluster, a pod shape)."""

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
    env: dict[EnvName, str] = Field(default_factory=dict)  # NCCL/UCX variables for this node type
    files: dict[str, str] = Field(default_factory=dict)  # e.g. NCCL_TOPO_FILE path -> why
    cache_dir: str | None = None  # where pip/build caches go (/mnt on Azure)
    from_facts: bool = False  # "local": everything comes from live facts
    sources: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
