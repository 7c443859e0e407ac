"""One-line-per-node summaries of ``NodeFacts`` (used by ``envbuild facts`` and reports)."""

from __future__ import annotations

from collections import Counter

from envbuild.facts.model import NodeFacts

COLUMNS = ["host", "GPUs", "driver", "CUDA drv/nvcc", "OS", "glibc", "cores", "mem", "pythons", "IB", "NCCL", "engines"]


def gpu_summary(facts: NodeFacts) -> str:
    """"8x NVIDIA H100 80GB HBM3 (sm_90)" or "no GPU"."""
    if not facts.gpus:
        return "no GPU"
    counts = Counter((g.name, g.sm) for g in facts.gpus)
    return ", ".join(f"{n}x {name} ({sm})" for (name, sm), n in counts.items())


def summary_row(facts: NodeFacts) -> list[str]:
    """The cells of ``COLUMNS`` for one node; "-" for unknown."""

    def d(v) -> str:
        return "-" if v in (None, "", [], {}) else str(v)

    pythons = sorted({p.version.rsplit(".", 1)[0] for p in facts.pythons}, key=lambda v: tuple(map(int, v.split("."))))
    ib_active = sum(1 for i in facts.infiniband if (i.state or "").upper().endswith("ACTIVE"))
    ib = f"{len(facts.infiniband)} ports ({ib_active} active)" if facts.infiniband else "-"
    engines = ", ".join(f"{k} {v}" for k, v in facts.container_engines.items())
    return [
        facts.host,
        gpu_summary(facts),
        d(facts.driver_version),
        f"{d(facts.driver_cuda)}/{d(facts.nvcc)}",
        d(facts.os_pretty or " ".join(x for x in (facts.os_id, facts.os_version) if x)),
        d(facts.glibc),
        d(facts.cpu_cores),
        f"{facts.memory_gib:g} GiB" if facts.memory_gib is not None else "-",
        d(" ".join(pythons)),
        ib,
        d(facts.nccl_version),
        d(engines),
    ]
