"""A job's wall time and queue: defaulted from the recipe and the target profile, checked against
the site's queue limits (pure).

The wall time a scheduler is asked for: ``--time`` when given, else twice the recipe's expected
minutes for the experiment (``resources``: the benchmark, or the smoke for ``--smoke-only``),
at least ``MIN_MINUTES``, else one hour. The queue: ``--partition`` when given (a job that does
not fit it is warned of, and submitted as asked), else the profile's default queue, else the
first of the profile's queues the job fits (``Jobs.queues``: node range and longest wall time,
from the site's guide).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from envbuild.targets.schema import Queue

MIN_MINUTES = 10
DEFAULT_WALLTIME = "01:00:00"


def seconds_of(walltime: str) -> int:
    """HH:MM:SS -> seconds."""
    h, m, s = (int(x) for x in walltime.split(":"))
    return h * 3600 + m * 60 + s


def minutes_of(walltime: str) -> float:
    return seconds_of(walltime) / 60


def walltime_of(minutes: float) -> str:
    total = int(math.ceil(minutes))
    return f"{total // 60:02d}:{total % 60:02d}:00"


def default_walltime(recipe, smoke_only: bool) -> tuple[str, str]:
    """(HH:MM:SS, why) for a job given no ``--time``."""
    experiment = "smoke" if smoke_only else "benchmark"
    row = next((r for r in recipe.resources if r.experiment == experiment), None)
    if row is None:
        return DEFAULT_WALLTIME, f"the recipe expects no time for its {experiment}: one hour"
    wanted = max(MIN_MINUTES, 2 * row.minutes)
    return walltime_of(wanted), (f"twice the recipe's expected {row.minutes:g} min for its {experiment} "
                                 f"(resources, {row.basis}), at least {MIN_MINUTES} min")


def misfits(queue: Queue, nodes: int, walltime: str) -> list[str]:
    """Why a job of ``nodes`` for ``walltime`` does not fit ``queue`` (empty: it fits)."""
    out = []
    if nodes < queue.min_nodes or (queue.max_nodes is not None and nodes > queue.max_nodes):
        span = f"{queue.min_nodes}-{queue.max_nodes}" if queue.max_nodes else f"{queue.min_nodes} or more"
        out.append(f"{queue.name} takes {span} nodes, the job asks {nodes}")
    if queue.max_walltime and minutes_of(walltime) > minutes_of(queue.max_walltime):
        out.append(f"{queue.name} runs jobs for at most {queue.max_walltime}, the job asks {walltime}")
    return out


@dataclass(frozen=True)
class QueueChoice:
    queue: str | None
    header: tuple[str, ...] = ()  # how the queue was chosen, when not by the flag
    warnings: tuple[str, ...] = ()  # the job does not fit the queue it was given


def choose_queue(given: str | None, default: str | None, queues: list[Queue], nodes: int, walltime: str,
                 source: str = "") -> QueueChoice:
    """The queue a job goes to: ``given`` (the flag) as asked, warned of when it does not fit a
    listed queue; else the profile's ``default`` when the job fits it, else the first listed
    queue it fits (said in the header); else the default, warned of."""
    rows = {q.name: q for q in queues}
    cite = f" ({source})" if source else ""
    if given:
        row = rows.get(given)
        if row is None:
            return QueueChoice(given, warnings=((f"queue {given} is not among the target's queues "
                                                 f"({', '.join(rows)}){cite}",) if rows else ()))
        return QueueChoice(given, warnings=tuple(f"{p}{cite}" for p in misfits(row, nodes, walltime)))
    if default is None and not rows:
        return QueueChoice(None)
    if default is not None and (default not in rows or not misfits(rows[default], nodes, walltime)):
        return QueueChoice(default, header=(f"queue {default}: from the target profile (jobs.queue)",))
    fitting = next((q for q in queues if not misfits(q, nodes, walltime)), None)
    if fitting is None:
        why = "; ".join(p for q in queues for p in misfits(q, nodes, walltime))
        return QueueChoice(default, warnings=(f"the job ({nodes} node(s), {walltime}) fits none of the target's "
                                              f"queues: {why}{cite}",))
    said = (f"the profile's {default} does not fit ({'; '.join(misfits(rows[default], nodes, walltime))}): "
            if default else "")
    return QueueChoice(fitting.name, header=(f"queue {fitting.name}: {said}the first of the target's queues that takes "
                                             f"{nodes} node(s) for {walltime}{cite}",))
