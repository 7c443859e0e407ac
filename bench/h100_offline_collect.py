"""Summarize a bench/h100_offline.sh pipeline state folder into one JSON file and a table.

    python bench/h100_offline_collect.py STATE_DIR OUT.json

Reads phases.tsv (wall time and exit code of each phase), the provision runs' JSON Lines and
run folders (step durations from events.jsonl, smoke.json, run.json's bundle), the preflight
of every shipped recipe, verify's answers, and the default Apex build's log, .so list and
memory samples. Standard library only (it runs with envbuild's venv on the node).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _result(jsonl: Path) -> dict | None:
    try:
        rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.startswith("{")]
    except (OSError, ValueError):
        return None
    res = [r for r in rows if r.get("type") == "result"] or rows[-1:]
    return res[-1] if res else None


def step_seconds(run: Path) -> dict[str, float]:
    """{step id: seconds from its start event to its last event} of the local node."""
    starts, ends = {}, {}
    try:
        for line in (run / "events.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e.get("host") != "local" or not e.get("step"):
                continue
            if e["kind"] == "start":
                starts[e["step"]] = e["ts"]
            elif e["kind"] in ("ok", "changed", "skipped", "failed"):
                ends[e["step"]] = e["ts"]
    except (OSError, ValueError):
        return {}
    return {s: round(ends[s] - t, 1) for s, t in starts.items() if s in ends}


def provision_summary(state: Path, name: str) -> dict | None:
    res = _result(state / name)
    if res is None:
        return {"error": (state / f"{name}.err").read_text()[-2000:] if (state / f"{name}.err").exists() else "no result"}
    if "run_dir" not in res:
        return {"error": "no result line yet", "last_event": res}
    run = Path(res["run_dir"])
    node = (res.get("results") or {}).get("local") or {}
    out = {"run_dir": str(run), "status": res.get("status"), "exit_code": res.get("exit_code"),
           "node_status": node.get("status"), "failed_step": node.get("failed_step"),
           "changed": node.get("changed"), "log_tail": (node.get("log_tail") or "")[-1500:],
           "steps_s": step_seconds(run), "run": _json(run / "run.json")}
    smoke = _json(run / "nodes" / "local" / "smoke.json")
    if smoke is not None:
        out["smoke"] = smoke
    plan = _json(run / "nodes" / "local" / "plan.json")
    if plan:
        out["decisions"] = plan.get("decisions")
        apex = next((s for s in plan["steps"] if s["kind"] == "apex_build"), None)
        if apex:
            out["apex_env"] = apex["params"]["env"]
    return out


def checks(state: Path) -> dict:
    out = {}
    for f in sorted(state.glob("check-*.json")):
        text = f.read_text()
        try:
            v, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
        except ValueError:
            out[f.stem[6:]] = {"error": text[-500:]}
            continue
        out[v.get("recipe", f.stem[6:])] = {
            "feasible": v.get("feasible"),
            "errors": [{"rule": x.get("rule"), "message": x.get("message")} for x in v.get("violations", [])
                       if x.get("severity") == "error"],
            "torch": v.get("torch_variant")}
    return out


def apex_default(state: Path) -> dict | None:
    log = state / "apex-default.log"
    if not log.exists():
        bound = state / "apex-default.bound"
        return {"ran": False, "bound_s": bound.read_text().strip()} if bound.exists() else None
    sos = [s for s in (state / "apex-default.sos").read_text().split() if s] if (state / "apex-default.sos").exists() else []
    mem = [int(x) for x in (state / "apex-default.mem").read_text().split()] if (state / "apex-default.mem").exists() else []
    text = log.read_text(errors="replace")
    return {"ran": True, "time_limit_s": int((state / "apex-default.bound").read_text().strip()),
            "sha": (state / "apex-default.sha").read_text().strip() if (state / "apex-default.sha").exists() else None,
            "extensions_linked": [Path(s).name for s in sos], "wheel_built": "Stored in directory" in text
            or bool(re.search(r"Successfully built apex", text)),
            "arch_flags": sorted(set(re.findall(r"-gencode[= ]arch=compute_\d+a?,code=sm_\d+a?", text))),
            "ninja_jobs": sorted(set(re.findall(r"ninja -v -j ?(\d+)|\[\d+/\d+\]", text)))[:5],
            "min_mem_available_gib": round(min(mem) / 2**20, 1) if mem else None,
            "log_tail": text[-1500:]}


def main(state_dir: str, out: str) -> None:
    state = Path(state_dir)
    phases = []
    if (state / "phases.tsv").exists():
        for line in (state / "phases.tsv").read_text().splitlines():
            name, secs, rc = line.split("\t")
            phases.append({"phase": name, "seconds": float(secs), "rc": int(rc)})
    summary = {"schema": "envbuild.bench.h100-offline/1", "done": (state / "done").exists(),
               "phases": phases, "nvidia_smi": (state / "nvidia-smi.csv").read_text()
               if (state / "nvidia-smi.csv").exists() else None,
               "checks": checks(state),
               "provision": {n: provision_summary(state, f"{n}.jsonl") for n in ("prov1", "prov2", "prov3")
                             if (state / f"{n}.jsonl").exists()},
               "verify": _json(state / "verify.json"),
               "verify_drift": (state / "verify-drift.json").read_text()[-3000:]
               if (state / "verify-drift.json").exists() else None,
               "verify_repaired": _json(state / "verify-repaired.json"),
               "apex_default": apex_default(state)}
    Path(out).write_text(json.dumps(summary, indent=1, default=str))
    for p in phases:
        print(f"{p['phase']:<22} {p['seconds']:>8.1f} s  rc {p['rc']}")
    for r, c in summary["checks"].items():
        print(f"check {r:<28} {'feasible' if c.get('feasible') else 'REFUSED'} "
              + ",".join(e["rule"] for e in c.get("errors", [])))
    cold = (summary["provision"].get("prov1") or {})
    print("cold steps:", json.dumps(cold.get("steps_s")))
    smoke = cold.get("smoke") or {}
    print("smoke:", json.dumps(smoke)[:1500])
    print("apex default:", json.dumps({k: v for k, v in (summary["apex_default"] or {}).items() if k != "log_tail"})[:800])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
