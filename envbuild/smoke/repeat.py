"""The repeat rule: what a later run on a reference's GPU model and count must reach (pure).

A reference is several runs of the same benchmark on the same GPU model and count
(``envbuild.smoke.references``). Runs of a healthy setup differ from one another: two
Megatron-DeepSpeed runs on the same 2 x H200 differed by 6.4 % with nothing changed, because
the per-iteration throughput inside one run spans 97-150 samples/s. The rule therefore:

* takes the **median** of the reference's runs as its statistic (robust to one odd run);
* allows a **tolerance** equal to the run-to-run noise those runs show (how far the farthest
  of them lies from their median, so each recorded run would itself pass), never less than
  ``FLOOR`` (5 %: NVIDIA's DGX Cloud Benchmarking recipes ask a run for > 95 % of their baseline,
  and criterion.rs keeps a noise threshold below which a change is not reported);
* refuses to judge (NOT JUDGED) when that noise exceeds ``CAP`` (8 %): such a
  reference could not tell a real 10 % slowdown from noise, which is what the rule is for
  (asv's step detection likewise reports a change only beyond its noise factor);
* judges nothing against runs recorded fewer than ``MIN_RUNS`` times on a GPU model and count
  (``envbuild.smoke.judge``: NOT JUDGED, naming them): their spread is then not measured (one
  run) or barely (two); a run of a reference judged against the others (never its own
  yardstick) is compared with ``MIN_RUNS - 1`` or more, and the verdict says so.

For a higher-is-better metric the run must reach ``median x (1 - tolerance)``; for a
lower-is-better one (a time), ``median / (1 - tolerance)``: the same share of speed either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.smoke.references import Reference

FLOOR = 0.05
CAP = 0.08
MIN_RUNS = 3


@dataclass(frozen=True)
class Bound:
    """What the rule asks of a run against ``reference``: ``required`` (None: not judged, ``why``)."""

    reference: Reference
    statistic: str  # what ``center`` is, in words
    center: float
    spread: float | None  # the farthest run's distance from the median, over it (None: one run)
    tolerance: float
    required: float | None
    why: str = ""

    @property
    def established(self) -> bool:
        return len(self.reference.runs) >= MIN_RUNS

    def describe(self) -> str:
        """The rule as the verdict states it."""
        n = len(self.reference.runs)
        noise = (f"the farthest run lies {self.spread:.1%} from their median" if self.spread is not None
                 else "one run: no spread measured")
        few = "" if self.established else f"; fewer than {MIN_RUNS} runs, so the floor may understate the noise"
        return (f"the {self.statistic} ({self.center:.6g}) of {n} run(s) recorded on {self.reference.gpus} x "
                f"{self.reference.gpu}, tolerance {self.tolerance:.1%} ({noise}; floor {FLOOR:.0%}, cap {CAP:.0%}){few}")


def bound(reference: Reference, higher_is_better: bool) -> Bound:
    """The bound a run must meet against ``reference`` (its runs already less the judged one)."""
    if not reference.runs:
        return Bound(reference, "median", 0.0, None, FLOOR, None, "the reference has no other run")
    center = reference.median
    if not center > 0:
        return Bound(reference, "median", center, None, FLOOR, None, "the reference's runs hold no positive value")
    spread = reference.deviation
    tolerance = max(FLOOR, spread or 0.0)
    statistic = "median" if len(reference.runs) > 1 else "value"
    if spread is not None and spread > CAP:
        return Bound(reference, statistic, center, spread, tolerance, None,
                     f"a run of the reference lies {spread:.1%} from their median, more than the {CAP:.0%} cap: it cannot tell a "
                     "real 10 % slowdown from noise (record the runs again, alone on their GPUs)")
    required = center * (1 - tolerance) if higher_is_better else center / (1 - tolerance)
    return Bound(reference, statistic, center, spread, tolerance, required)
