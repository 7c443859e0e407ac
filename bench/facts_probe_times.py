"""Where a node's facts take their time: each facts probe alone, then the whole script.

    python bench/facts_probe_times.py [--python PATH] [--repeat 3] [-o FILE]

Each probe of ``envbuild.facts.assemble.all_probes()`` runs alone (``build_script([probe])``,
the same preamble and bounds as ``envbuild facts``) ``--repeat`` times; then the whole script as
``envbuild facts`` runs it, and the whole script without ``pip_list`` (what provision runs).
``--python`` is the interpreter whose packages and torch NCCL are probed (provision passes the
environment's). Wall seconds of each run, their median, and each run's exit statuses; written as
JSON to -o (default: printed). Issue 52's no-op: the part of a GPU node's no-op spent in facts.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envbuild.facts.assemble import all_probes  # noqa: E402
from envbuild.facts.script import build_script, split_sections  # noqa: E402


def _time(script: str) -> tuple[float, dict[str, int]]:
    t0 = time.monotonic()
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, errors="replace", check=False)
    return time.monotonic() - t0, {name: s.rc for name, s in split_sections(out.stdout).items()}


def _row(name: str, script: str, repeat: int) -> dict:
    walls, rcs = [], []
    for _ in range(repeat):
        s, rc = _time(script)
        walls.append(round(s, 3))
        rcs.append(rc)
    return {"probe": name, "median_s": round(statistics.median(walls), 3), "runs_s": walls, "rc": rcs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--python", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-o", "--output", type=Path)
    a = ap.parse_args(argv)
    probes = all_probes()
    rows = [_row(p.name, build_script([p], python=a.python), a.repeat) for p in probes]
    rows.append(_row("(all)", build_script(probes, python=a.python), a.repeat))
    rows.append(_row("(all but pip_list)", build_script([p for p in probes if p.name != "pip_list"],
                                                        python=a.python), a.repeat))
    doc = {"what": __doc__.split("\n", 1)[0], "host": platform.node(), "python": a.python, "rows": rows}
    text = json.dumps(doc, indent=1)
    if a.output:
        a.output.write_text(text + "\n")
    else:
        print(text)
    for r in sorted(rows, key=lambda r: -r["median_s"])[:12]:
        print(f"{r['median_s']:8.3f} s  {r['probe']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
