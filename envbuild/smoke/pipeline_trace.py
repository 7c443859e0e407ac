"""MegatronApp's per-micro-batch trace, read back into the pipeline's computation order (pure).

MegatronApp's adaptive schedule (Megatron/megatron/core/pipeline_parallel/schedules.py at
1bed2a72, ``forward_backward_pipelining_with_interleaving``) prints, for every schedule slot it
computes, ``"<rank>, <slot>, forward|backward start|finished, <time.time()>%"`` (:896,910,959,974),
and training.py prints ``"rank R iteration starts|ends at timestamp T%"`` (:770,793). The ``%``
ends a record: the ranks share one file, so records may run into each other on one line.

A slot k of an iteration maps to a micro-batch and a model chunk as the schedule's own
``get_model_chunk_id`` does (:516-522): with P pipeline ranks and C chunks per rank, the chunk of
a forward slot is ``(k % (P*C)) // P`` and of a backward slot ``C - 1 - (k % (P*C)) // P``; the
micro-batch is ``(k // (P*C)) * P + k % P``. ``computation_order(text)`` returns one iteration
(by default the last one in which every rank computed backward slots, i.e. the last training
iteration), each rank's computations with their start and end in ms from the iteration's start:
what the seed's visualize_trace.py draws, and what ``envbuild.report.pipeline_svg`` draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envbuild.recipes.linear import linear

EVENT_RE = linear(r"(\d+), (\d+), (forward|backward) (start|finished), ([\d.]+)%")
MARK_RE = linear(r"rank (\d+) iteration (starts|ends) at timestamp ([\d.]+)%")
ARG_RE = linear(r"(?m)^\s+(num_layers|pipeline_model_parallel_size|num_layers_per_virtual_pipeline_stage)"
                r" \.+ (\S+)")
SOURCE = ("OpenSQZ/MegatronApp 1bed2a72 Megatron/megatron/core/pipeline_parallel/schedules.py:516-522 "
          "(get_model_chunk_id), :896,910,959,974 (the slot records); Megatron/megatron/training.py:770,793")


@dataclass(frozen=True)
class Step:
    """One computation of one rank: a forward or backward pass of one micro-batch on one chunk."""

    rank: int
    kind: str  # forward | backward
    slot: int
    microbatch: int
    chunk: int
    start_ms: float  # from the iteration's start (the earliest rank's)
    end_ms: float


@dataclass(frozen=True)
class Order:
    """One iteration's computation order over the pipeline's ranks."""

    iteration: int  # 1-based, counting every schedule run (training and evaluation) of rank 0
    iterations: int  # how many the trace holds
    ranks: int
    chunks: int
    microbatches: int
    duration_ms: float
    steps: list[Step] = field(default_factory=list)
    source: str = SOURCE


def _args(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in ARG_RE.findall(text) if v.isdigit()}


def computation_order(text: str, iteration: int | None = None) -> Order | None:
    """The computation order of one iteration of a MegatronApp trace (None: no slot records, or
    no iteration in which every rank computed). ``iteration``: 1-based, as ``Order.iteration``."""
    args = _args(text)
    pp = args.get("pipeline_model_parallel_size")
    per_stage = args.get("num_layers_per_virtual_pipeline_stage")
    layers = args.get("num_layers")
    if not pp or not per_stage or not layers or layers % (pp * per_stage):
        return None
    chunks = layers // (pp * per_stage)
    marks: dict[int, list[list[float]]] = {}
    for rank, what, ts in MARK_RE.findall(text):
        spans = marks.setdefault(int(rank), [])
        if what == "starts":
            spans.append([float(ts), float("inf")])
        elif spans:
            spans[-1][1] = float(ts)
    if not marks or set(marks) != set(range(pp)):
        return None
    count = min(len(v) for v in marks.values())
    opened: dict[tuple[int, int, str], float] = {}
    done: dict[int, list[tuple[int, str, int, float, float]]] = {}
    for rank_s, slot_s, kind, edge, ts_s in EVENT_RE.findall(text):
        rank, slot, ts = int(rank_s), int(slot_s), float(ts_s)
        if edge == "start":
            opened[(rank, slot, kind)] = ts
            continue
        begin = opened.pop((rank, slot, kind), None)
        spans = marks.get(rank, [])
        at = next((i for i, (a, b) in enumerate(spans) if a <= ts <= b), None)
        if begin is None or at is None or at >= count:
            continue
        done.setdefault(at, []).append((rank, kind, slot, begin, ts))
    training = [i for i in range(count)
                if {r for r, k, *_ in done.get(i, []) if k == "backward"} == set(range(pp))]
    if iteration is not None:
        pick = iteration - 1 if 0 < iteration <= count and done.get(iteration - 1) else None
    else:
        pick = training[-1] if training else None
    if pick is None:
        return None
    t0 = min(marks[r][pick][0] for r in range(pp))
    t1 = max(marks[r][pick][1] for r in range(pp))
    if t1 == float("inf"):  # a rank never ended it (a hung run): up to the last computation
        t1 = max(end for *_, end in done[pick])
    group = pp * chunks
    steps = []
    for rank, kind, slot, begin, end in sorted(done[pick], key=lambda e: (e[0], e[3])):
        pos = (slot % group) // pp
        chunk = pos if kind == "forward" else chunks - 1 - pos
        steps.append(Step(rank, kind, slot, (slot // group) * pp + slot % pp, chunk,
                          (begin - t0) * 1000.0, (end - t0) * 1000.0))
    microbatches = max((s.microbatch for s in steps), default=-1) + 1
    return Order(iteration=pick + 1, iterations=count, ranks=pp, chunks=chunks, microbatches=microbatches,
                 duration_ms=(t1 - t0) * 1000.0, steps=steps)
