"""Issue 52's rows: how long a recipe takes to provision cold, to provision again (the no-op), and to run
its benchmark the first and the second time, read from the run folders of a GPU lease.

    python bench/gpu_cold.py FOLDER [FOLDER ...] [-o bench/results/gpu-cold.json]

FOLDER holds a lease's run folders (each with run.json and events.jsonl; as docs/results/*/ keep
them): every ``envbuild provision`` run of one recipe on one node, in the order they started.

- ``cold_s``: the first run that installed (``--no-smoke``, no ``--from-step``), from run.json's
  started to finished, when it was cold: none of its steps was skipped or run again over what an
  earlier run left (events ``skipped``/``rerun``), else ``null`` (a node that held the environment
  already); a later such run is the no-op (``noop_s``: the first of them).
- ``first_run_s``, ``second_run_s``: the benchmark runs (``--from-step smoke``) in order. A run that
  did not end with a verdict (exit 0 PASS, 1 FAIL, 5 NOT JUDGED) gives no figure: ``null``, and
  ``runs`` says what it ended with. A figure is never taken from a run that stopped early.
- ``prebuilt``: the build-cache keys the bundle seeded (run.json's ``bundle.prebuilt_seeded``).
- ``gpu``, ``gpus``: from the node's facts (nodes/*/facts.json) of the cold run.
- ``steps``: the cold run's five longest steps (events.jsonl), where the time went.

The row is appended to the output file (its ``rows``), each with the folders it was read from. Rows
with different ``gpu`` are different machines: compare a figure only with one of the same GPU.
Exit codes: 0 rows written; 2 a folder holds no provision run (named).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

VERDICT_EXITS = {0, 1, 5}  # PASS, FAIL, NOT JUDGED: the run went to its end


def _seconds(run: dict) -> float:
    start, end = (datetime.fromisoformat(run[k].replace("Z", "+00:00")) for k in ("started", "finished"))
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


def kind_of(run: dict) -> str:
    """install (no smoke, no --from-step), benchmark (--from-step smoke) or other."""
    options = run.get("options") or {}
    if options.get("from_step") == "smoke":
        return "benchmark"
    if not options.get("smoke", True) and not options.get("from_step"):
        return "install"
    return "other"


def runs_in(folder: Path) -> list[tuple[Path, dict]]:
    found = []
    for path in sorted(folder.glob("*/run.json")):
        run = json.loads(path.read_text())
        if run.get("argv", [None, None])[1:2] == ["provision"] and run.get("started") and run.get("finished"):
            found.append((path.parent, run))
    return sorted(found, key=lambda r: r[1]["started"])


def _gpu(folder: Path) -> tuple[str | None, int | None]:
    for facts in sorted(folder.glob("nodes/*/facts.json")):
        gpus = json.loads(facts.read_text()).get("gpus") or []
        names = sorted({g.get("name") for g in gpus})
        return (names[0] if len(names) == 1 else " + ".join(n for n in names if n)), len(gpus)
    return None, None


def _figure(runs: list[tuple[Path, dict]], i: int) -> float | None:
    """The i-th run's seconds, when there is one and it went to its end (a verdict)."""
    if i >= len(runs) or runs[i][1].get("exit_code") not in VERDICT_EXITS:
        return None
    return _seconds(runs[i][1])


def rows(folders: list[Path]) -> list[dict]:
    """One row per (recipe, folder): see the module's docstring."""
    out = []
    for folder in folders:
        found = runs_in(folder)
        if not found:
            raise SystemExit(f"error: {folder}: no envbuild provision run folder (run.json) in it")
        for recipe in sorted({r["recipe"] for _, r in found}):
            mine = [(f, r) for f, r in found if r["recipe"] == recipe]
            installs = [(f, r) for f, r in mine if kind_of(r) == "install"]
            benches = [(f, r) for f, r in mine if kind_of(r) == "benchmark"]
            cold = installs[0] if installs else None
            gpu, gpus = _gpu(cold[0]) if cold else (None, None)

            cold_ok = cold is not None and cold[1].get("exit_code") in VERDICT_EXITS and was_cold(cold[0])
            out.append({
                "recipe": recipe, "gpu": gpu, "gpus": gpus,
                "cold_s": _seconds(cold[1]) if cold_ok else None,
                "noop_s": _figure(installs, 1),
                "first_run_s": _figure(benches, 0), "second_run_s": _figure(benches, 1),
                "prebuilt": sorted(((cold[1].get("bundle") or {}).get("prebuilt_seeded") or [])) if cold else [],
                "steps": dict(sorted(step_seconds(cold[0]).items(), key=lambda kv: -kv[1])[:5]) if cold else {},
                "runs": [{"run": f.name, "kind": kind_of(r), "s": _seconds(r), "exit_code": r.get("exit_code"),
                          "verdict": r.get("verdict")} for f, r in mine],
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
    for r in new:
        print(f"{r['recipe']} on {r['gpus']} x {r['gpu']}: cold {r['cold_s']} s, no-op {r['noop_s']} s, "
              f"benchmark {r['first_run_s']} s then {r['second_run_s']} s, prebuilt {r['prebuilt'] or 'none'} "
              f"({r['from']})")
    if args.output:
        doc = json.loads(args.output.read_text()) if args.output.exists() else {
            "what": "issue 52: cold provision, the no-op, and the first and second benchmark run, from a GPU "
                    "lease's run folders (bench/gpu_cold.py); null where no run went to its end", "rows": []}
        doc["rows"] += new
        args.output.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
