"""Node facts: what is really on a node, as a versioned JSON document.

Produced by ``envbuild facts`` (commands + pure parsers, see ``envbuild.facts.gather``) or
assumed from a target profile (``from_target``) when a lock or plan is made away from the node.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

FACTS_SCHEMA: Final = "envbuild.facts/1"


class _M(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")


class Gpu(_M):
    index: int
    name: str
    compute_capability: str  # "9.0"
    memory_mib: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None

    @property
    def sm(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")


class Interpreter(_M):
    path: str
    version: str  # "3.11.7"


class IbDevice(_M):
    name: str  # "mlx5_0:1" (device:port)
    state: str | None = None
    rate: str | None = None
    netdev: str | None = None  # the IPoIB or RoCE interface of the port ("ib0", "eth2")
    ipv4: list[str] = Field(default_factory=list)  # that interface's IPv4 addresses


class NodeFacts(_M):
    """Everything envbuild knows about one node. Unknown = None, absent = empty list."""

    schema_: Literal["envbuild.facts/1"] = Field(FACTS_SCHEMA, alias="schema")
    host: str
    origin: str = "collected"  # "collected" or "profile:<target>"
    collected_at: str | None = None
    gpus: list[Gpu] = Field(default_factory=list)
    driver_version: str | None = None
    driver_cuda: str | None = None  # "CUDA Version" reported by nvidia-smi
    nvcc: str | None = None  # "13.0"
    nvcc_path: str | None = None
    cuda_home: str | None = None
    os_id: str | None = None
    os_version: str | None = None
    os_pretty: str | None = None
    glibc: str | None = None
    arch: str | None = None
    cpu_cores: int | None = None
    cpu_model: str | None = None
    memory_gib: float | None = None
    pythons: list[Interpreter] = Field(default_factory=list)
    pip_packages: dict[str, str] = Field(default_factory=dict)
    pip_config: dict[str, list[str]] = Field(default_factory=dict)  # pip.conf file -> section.key set there
    pip_config_env: list[str] = Field(default_factory=list)  # variables standing in for them (facts.pipconf)
    conda: list[str] = Field(default_factory=list)  # conda/mamba/micromamba executables
    modules: list[str] = Field(default_factory=list)  # environment modules available
    infiniband: list[IbDevice] = Field(default_factory=list)
    nccl_version: str | None = None
    container_engines: dict[str, str] = Field(default_factory=dict)
    topology: str | None = None  # nvidia-smi topo -m, verbatim
    home: str | None = None  # the login user's $HOME (absolute paths in the plan)
    path: str | None = None  # the login user's $PATH (search path of build commands)
    user: str | None = None
    missing: dict[str, str] = Field(default_factory=dict)  # fact -> why it was not gathered

    model_config = ConfigDict(defer_build=True, extra="forbid", populate_by_name=True)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def archs(self) -> list[str]:
        """Distinct compute capabilities, sorted ("8.0", "9.0")."""
        return sorted({g.compute_capability for g in self.gpus}, key=lambda v: tuple(map(int, v.split("."))))

    def python(self, minor: str) -> Interpreter | None:
        """The first interpreter whose version starts with ``minor`` ("3.9")."""
        return next((p for p in self.pythons if p.version == minor or p.version.startswith(minor + ".")), None)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2, exclude_none=False) + "\n"


class UvBinary(BaseModel):
    """The controller's uv (``uv.find_uv_bin()``), a fact of the controller found by
    ``envbuild.facts.uvbin.controller_uv``: one binary that the planner may push to a node of
    the same OS and architecture whose C library can run it."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    version: str  # "0.13.9"
    sha256: str
    os: str  # "linux"
    arch: str  # "x86_64" (uname -m)
    libc: Literal["glibc", "musl", "static"]
    glibc_min: str | None = None  # "2.17": the manylinux tag of its wheel (glibc builds)
