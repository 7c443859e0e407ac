"""Floors the built-in smoke is judged against (a table of rows with their sources; pure).

A floor is a same-hardware ratio, never an absolute rate: the GPT smoke's model FLOP
utilisation (``mfu``) is its achieved FLOP rate over the matmul peak the same script measures
on the same device in the same run, so one floor holds on any GPU model. A row applies to the
smoke records of its kind, device and model shape (``config``: the preset's dimensions, as the
record reports them); a record it applies to gets ``thresholds: {metric: floor}``, which the
judge decides (``envbuild.smoke.judge.floor_verdicts``: the record's ``floors``) and the report
shows (``envbuild.report.bench``).

    >>> floors_for({"kind": "gpt", "device": "cuda", "config": {"layers": 24, "hidden": 1024,
    ...             "heads": 16, "seq": 1024, "batch": 16, "vocab": 50304, "steps": 20}})
    {'mfu': 0.4}
    >>> floors_for({"kind": "gpt", "device": "cpu", "config": {"layers": 2, "hidden": 128}})
    {}
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Floor:
    kind: str  # the smoke script (gpt)
    device: str  # cpu | cuda (cuda:N counts as cuda)
    config: dict = field(hash=False)  # the model shape the floor was measured for
    metric: str
    floor: float
    source: str
    why: str


FLOORS: tuple[Floor, ...] = (
    Floor("gpt", "cuda", {"layers": 24, "hidden": 1024, "heads": 16, "seq": 1024, "batch": 16}, "mfu", 0.40,
          source="docs/results/h100-offline-run3/gpt.out (H100 80GB HBM3, bf16: mfu 0.611); "
                 "docs/results/h200x2-run4/gpt.out (H200: 0.693)",
          why="the 350m preset (GPT-2 medium shape) on one GPU in bf16 reached 0.61-0.69 of the measured "
              "matmul peak on the lent H100 and H200; below 0.40 something is wrong with the stack (no "
              "fused attention, fp32 math, a throttled or shared GPU), whatever the GPU model"),
)


def _device(record: dict) -> str:
    return "cuda" if str(record.get("device") or "").startswith("cuda") else str(record.get("device") or "")


def floors_for(record: dict) -> dict[str, float]:
    """``{metric: floor}`` of the rows that apply to a smoke ``record`` (an envbuild.smoke/1 object)."""
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    return {f.metric: f.floor for f in FLOORS
            if f.kind == record.get("kind") and f.device == _device(record)
            and all(config.get(k) == v for k, v in f.config.items())}
