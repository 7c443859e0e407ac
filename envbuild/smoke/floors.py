"""Floors the built-in smoke is judged against (a table of rows with their sources; pure).

The GPT smoke's floor is a same-hardware ratio: its model FLOP utilisation (``mfu``) is its
achieved FLOP rate over the matmul peak the same script measures on the same device in the same
run, so one floor holds on any GPU model. The all-reduce's floor is a bus bandwidth (GB/s,
nccl-tests' busbw), which depends on how the GPUs are linked: its row holds only for the GPU
models it was measured on (``gpus``: names as torch and nvidia-smi give them), with NCCL over
two or more ranks and a sweep that reached 1 GiB (``at_least``). A row applies to the smoke
records of its kind, device, settings (``config``: equal; ``at_least``: reached) and GPU; a
record it applies to gets ``thresholds: {metric: floor}``, which the judge decides
(``envbuild.smoke.judge.floor_verdicts``: the record's ``floors``) and the report shows
(``envbuild.report.bench``).

    >>> floors_for({"kind": "gpt", "device": "cuda", "config": {"layers": 24, "hidden": 1024,
    ...             "heads": 16, "seq": 1024, "batch": 16, "vocab": 50304, "steps": 20}})
    {'mfu': 0.4}
    >>> floors_for({"kind": "gpt", "device": "cpu", "config": {"layers": 2, "hidden": 128}})
    {}
    >>> floors_for({"kind": "collective", "device": "cuda", "device_name": "NVIDIA H200",
    ...             "config": {"backend": "nccl", "world_size": 2, "max_bytes": 1 << 30}})
    {'max_busbw_gbps': 150.0}
    >>> floors_for({"kind": "collective", "device": "cuda", "device_name": "NVIDIA H200 NVL",
    ...             "config": {"backend": "nccl", "world_size": 2, "max_bytes": 1 << 30}})
    {}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Floor:
    kind: str  # the smoke script (gpt, collective)
    device: str  # cpu | cuda (cuda:N counts as cuda)
    config: dict = field(hash=False)  # the record's config values the floor was measured for (equal)
    metric: str
    floor: float
    source: str
    why: str
    at_least: dict = field(default_factory=dict, hash=False)  # config values the record must reach
    gpus: tuple[str, ...] = ()  # the GPU names it holds for (full-match patterns); () any


FLOORS: tuple[Floor, ...] = (
    Floor("gpt", "cuda", {"layers": 24, "hidden": 1024, "heads": 16, "seq": 1024, "batch": 16}, "mfu", 0.40,
          source="docs/results/h100-offline-run3/gpt.out (H100 80GB HBM3, bf16: mfu 0.611); "
                 "docs/results/h200x2-run4/gpt.out (H200: 0.693)",
          why="the 350m preset (GPT-2 medium shape) on one GPU in bf16 reached 0.61-0.69 of the measured "
              "matmul peak on the lent H100 and H200; below 0.40 something is wrong with the stack (no "
              "fused attention, fp32 math, a throttled or shared GPU), whatever the GPU model"),
    Floor("collective", "cuda", {"backend": "nccl"}, "max_busbw_gbps", 150.0,
          at_least={"world_size": 2, "max_bytes": 1 << 30},
          gpus=(r"NVIDIA H200",),
          source="docs/results/gpu-smoke/collective-1.out, collective-2.out (2x H200, NVLink NV18, "
                 "NCCL 2.28.9: max busbw 328.2 and 327.6 GB/s at 1 GiB); collective-p2p-off*.out "
                 "(the same GPUs with NCCL_P2P_DISABLE=1: 27.7 and 27.6 GB/s)",
          why="two H200s of an SXM board reduce over NVLink: NCCL's all-reduce reached 328 GB/s bus "
              "bandwidth at 1 GiB (284 at 128 MiB, still rising). Below 150 the ranks do not use the "
              "links (peer access off: 27.7 GB/s through host memory) or share them with other work. "
              "busbw is normalised so that it does not depend on the rank count (nccl-tests), so the "
              "floor holds for 2 to 8 GPUs of one board. H100s share the H200's NVLink but were not "
              "measured here: no floor for them yet"),
)


def _device(record: dict) -> str:
    return "cuda" if str(record.get("device") or "").startswith("cuda") else str(record.get("device") or "")


def _reached(config: dict, at_least: dict) -> bool:
    return all(isinstance(config.get(k), (int, float)) and config[k] >= v for k, v in at_least.items())


def floors_for(record: dict) -> dict[str, float]:
    """``{metric: floor}`` of the rows that apply to a smoke ``record`` (an envbuild.smoke/1 object)."""
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    name = str(record.get("device_name") or "")
    return {f.metric: f.floor for f in FLOORS
            if f.kind == record.get("kind") and f.device == _device(record)
            and all(config.get(k) == v for k, v in f.config.items()) and _reached(config, f.at_least)
            and (not f.gpus or any(re.fullmatch(g, name) for g in f.gpus))}
