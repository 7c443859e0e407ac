"""Issue 52's rows: how long a recipe takes to provision cold, to provision again (the no-op), and to run
its benchmark the first and the second time, read from the run folders of a GPU lease.

    python bench/gpu_cold.py FOLDER [FOLDER ...] [-o bench/results/gpu-cold.json]

FOLDER holds a lease's run folders (each with run.json and events.jsonl; as docs/results/*/ keep
them): every ``envbuild provision`` run of one recipe on one node, in the order they started. Each is
read through the run record (``envbuild.record.RunRecord``), as envbuild reads its own: a run.json of
an older schema is mapped (``envbuild.record.migrate``), one of a schema envbuild does not read, or a
damaged one, is refused with the file named.

- ``cold_s``: the first run that installed (``--no-smoke``, no ``--from-step``), from run.json's
  started to finished, when it was cold: none of its steps was skipped or run again over what an
  earlier run left (events ``skipped``/``rerun``), else ``null`` (a node that held the environment
  already); a later such run is the no-op (``noop_s``: the first of them; ``noop_phase_s``: its
  run.json's seconds per phase, where it recorded them).
- ``first_run_s``, ``second_run_s``: the benchmark runs (``--from-step smoke``) in order: wall times
  (started to finished) of runs that went to their end with any verdict, not judged figures;
  ``first_run_verdict``, ``second_run_verdict`` say which (PASS, FAIL or NOT JUDGED: run.json's
  verdict, else its exit code's word). A run that did not go to its end (a node not ok, or an exit
  other than 0 PASS, 1 FAIL, 5 NOT JUDGED) gives no figure: ``null`` and a ``null`` verdict, and
  ``runs`` says what it ended with. A figure is never taken from a run that stopped early.
- ``prebuilt``: the build-cache keys whose carried wheel the cold install installed, as its report
  says (``envbuild.report.collect.prebuilt_use``): carried (run.json's ``bundle.prebuilt``, with
  ``bundle.prebuilt_seeded``; a record made before ``bundle.prebuilt`` existed names only these, so
  a key another bundle of the lease had seeded first is missing there), whose node step ran in
  that run, and not shadowed by another wheel in the controller's cache (``bundle.prebuilt_not_used``).
- ``restored``: the build-cache keys of a source's in-tree build outputs (``build_outputs``) that the
  cold install restored instead of building (its node's log.txt says "restored from the build
  cache" for that step's outputs, and the save after the build "none of its N file(s) changed after
  the restore": a build that redid part of them is not counted): from a bundle, or from the node's
  cache where an earlier install of the lease built them (``wipe:JOB`` in bench/gpu_session.sh:
  the next node of the kind).
- ``gpu``, ``gpus``: from the node's facts (nodes/*/facts.json) of the cold run.
- ``steps``: the cold run's five longest steps (events.jsonl), where the time went.

The row is appended to the output file (its ``rows``), each with the folders it was read from. Rows
with different ``gpu`` are different machines: compare a figure only with one of the same GPU.
Exit codes: 0 rows written; 2 a folder holds no provision run, or a run.json that is not a run record (named).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.errors import InputError  # noqa: E402
from envbuild.node import treecache  # noqa: E402
from envbuild.record import RunInfo, RunRecord  # noqa: E402
from envbuild.report.collect import prebuilt_use  # noqa: E402

EXIT_WORDS = {0: "PASS", 1: "FAIL", 5: "NOT JUDGED"}  # the exits of a run that went to its end, and their words


def _seconds(run: RunInfo) -> float:
    start, end = (datetime.fromisoformat(str(t).replace("Z", "+00:00")) for t in (run.started, run.finished))
    return round((end - start).total_seconds(), 1)


def step_seconds(folder: Path) -> dict[str, float]:
    """{step id: seconds from its start event to its last event}, the first node's."""
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for line in (folder / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if not e.get("step"):
            continue
        if e.get("kind") == "start":
            starts.setdefault(e["step"], e["ts"])
        elif e.get("kind") in ("ok", "changed", "skipped", "failed"):
            ends[e["step"]] = e["ts"]
    return {s: round(ends[s] - t, 1) for s, t in starts.items() if s in ends}


def was_cold(folder: Path) -> bool:
    """No step of the run was skipped or run again over an earlier run's work: the prefix was new."""
    for line in (folder / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("step") and e.get("kind") in ("skipped", "rerun"):
            return False
    return True


def kind_of(run: RunInfo) -> str:
    """install (no smoke, no --from-step), benchmark (--from-step smoke) or other."""
    options = run.options
    if options.get("from_step") == "smoke":
        return "benchmark"
    if run.smoke_skipped and not options.get("from_step"):
        return "install"
    return "other"


def verdict_of(run: RunInfo) -> str | None:
    """The run's word when it went to its end: run.json's verdict (the judge's), else the word of its
    exit code; None for a run that stopped early. It went to its end when every node was ok (status
    ``ok``: a run refused by preflight exits 1 too, with status ``failed``) and its exit is a verdict's
    (0, 1, 5); a run.json from before exit codes were recorded (``envbuild.run/1``) by its verdict alone."""
    if run.status != "ok":
        return None
    if run.exit_code is None:
        return run.verdict
    if run.exit_code not in EXIT_WORDS:
        return None
    return run.verdict or EXIT_WORDS[run.exit_code]


def runs_in(folder: Path) -> list[RunRecord]:
    """The provision runs in ``folder`` that started and finished, read through the run record
    (``envbuild.record.RunRecord``: older schemas mapped, a damaged or unknown one an InputError)."""
    found = []
    for path in sorted(folder.glob("*/run.json")):
        record = RunRecord.load(path.parent)
        if record.run.argv[1:2] == ["provision"] and record.run.started and record.run.finished:
            found.append(record)
    return sorted(found, key=lambda r: str(r.run.started))


def _gpu(record: RunRecord) -> tuple[str | None, int | None]:
    """The GPU model and count from the first node's facts.json that has one."""
    for node in record.nodes():
        if node.facts is None:
            continue
        names = sorted({g.name for g in node.facts.gpus})
        return (names[0] if len(names) == 1 else " + ".join(names)), len(node.facts.gpus)
    return None, None


def restored(record: RunRecord) -> list[str]:
    """The keys of the run's build steps whose outputs its nodes restored from the build cache and
    whose build then changed none of them (the node's log lines of ``envbuild.node.treecache``,
    each naming its key: restore's, and the save's after it, "none of its N file(s) changed after
    the restore"). A restore the build then partly redid (ninja rebuilt a module) is not one."""
    keys = set()
    for node in record.nodes():
        if node.plan is None:
            continue
        kept = treecache.kept_restores(node.log_lines)
        keys |= {s.params.cache_key for s in node.plan.cached_builds() if s.params.cache_key in kept}
    return sorted(keys)


def _figure(runs: list[RunRecord], i: int) -> tuple[float | None, str | None]:
    """The i-th run's wall seconds and its verdict, when there is one and it went to its end; else
    (None, None). The seconds are a wall time whatever the verdict, never a judged figure."""
    if i >= len(runs) or (word := verdict_of(runs[i].run)) is None:
        return None, None
    return _seconds(runs[i].run), word


def rows(folders: list[Path]) -> list[dict]:
    """One row per (recipe, folder): see the module's docstring."""
    out = []
    for folder in folders:
        found = runs_in(folder)
        if not found:
            raise SystemExit(f"error: {folder}: no envbuild provision run folder (run.json) in it")
        for recipe in sorted({r.run.recipe for r in found}):
            mine = [r for r in found if r.run.recipe == recipe]
            installs = [r for r in mine if kind_of(r.run) == "install"]
            benches = [r for r in mine if kind_of(r.run) == "benchmark"]
            cold = installs[0] if installs else None
            gpu, gpus = _gpu(cold) if cold else (None, None)

            cold_ok = cold is not None and verdict_of(cold.run) is not None and was_cold(cold.path)
            (first_s, first_word), (second_s, second_word) = _figure(benches, 0), _figure(benches, 1)
            out.append({
                "recipe": recipe, "gpu": gpu, "gpus": gpus,
                "cold_s": _seconds(cold.run) if cold and cold_ok else None,
                "noop_s": _figure(installs, 1)[0],
                # where the no-op's seconds went (run.json's phase_s; {} from a run made before it)
                "noop_phase_s": installs[1].run.phase_s if _figure(installs, 1)[0] is not None else {},
                "first_run_s": first_s, "first_run_verdict": first_word,
                "second_run_s": second_s, "second_run_verdict": second_word,
                "prebuilt": prebuilt_use(cold.run.bundle, cold.nodes())["prebuilt"]
                if cold and cold.run.bundle else [],
                "restored": restored(cold) if cold else [],
                "steps": dict(sorted(step_seconds(cold.path).items(), key=lambda kv: -kv[1])[:5]) if cold else {},
                "runs": [{"run": r.path.name, "kind": kind_of(r.run), "s": _seconds(r.run),
                          "exit_code": r.run.exit_code, "verdict": r.run.verdict} for r in mine],
                "from": str(folder),
            })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("-o", "--output", type=Path, help="append the rows to this JSON file's 'rows'")
    args = ap.parse_args(argv)
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        print(f"error: no such folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        new = rows(args.folders)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in new:
        print(f"{r['recipe']} on {r['gpus']} x {r['gpu']}: cold {r['cold_s']} s, no-op {r['noop_s']} s, "
              f"benchmark {r['first_run_s']} s ({r['first_run_verdict']}) then {r['second_run_s']} s "
              f"({r['second_run_verdict']}), prebuilt {r['prebuilt'] or 'none'} ({r['from']})")
    if args.output:
        doc: dict[str, Any] = json.loads(args.output.read_text()) if args.output.exists() else {
            "what": "issue 52: cold provision, the no-op, and the first and second benchmark run, from a GPU "
                    "lease's run folders (bench/gpu_cold.py); wall times of runs that went to their end with "
                    "any verdict (PASS, FAIL or NOT JUDGED: *_verdict), not judged figures; null where no run "
                    "went to its end", "rows": []}
        doc["rows"] += new
        args.output.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
