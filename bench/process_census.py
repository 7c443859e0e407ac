"""Where a command's CPU goes, by kind of process: the test suite's census (issue 52).

    apt-get install -y acct strace
    touch /tmp/acct && accton /tmp/acct
    strace -f -tt --seccomp-bpf -e trace=execve -e signal=none -s 400 -o /tmp/exec.txt bash .ci/test
    accton off
    python bench/process_census.py /tmp/exec.txt /tmp/acct [--label L] [--out bench/results/suite-processes.json]

Process accounting (``accton``; read back with ``dump-acct``) gives every process that ended:
its command name, user and system CPU, elapsed time, pid and start second. It has no arguments,
so the execs traced by strace (``--seccomp-bpf`` stops only at execve, so the suite runs about a
quarter slower, not several times) are joined to it by pid and time: the last exec of that pid
within the process's life. Pids wrap (32768 here), hence the time. A process that never exec'd
(a fork: ansible-playbook's workers) keeps its parent's command name.

Each process is put in one kind (``KINDS``, first match wins, by command name and argv): an
Ansible module run by the local connection (python reading its payload on stdin), one on an sshd
node (``/usr/bin/python3`` likewise), the controller's ansible-playbook and its forks, the
envbuild CLI in a subprocess, an environment's import check, the smoke's GPT and all-reduce
runs, ensurepip, uv, pip, podman, compilers, strace itself. It prints the kinds by CPU and,
with ``--out``, appends a row (the kinds, the total, the command's label) to a JSON list.

Figures are CPU seconds from accounting (10 ms ticks: many tiny processes read as 0). strace's
own CPU is listed as a kind: the run without it costs that much less.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

LINE = re.compile(r"(\d+)\s+(\d\d:\d\d:\d\d\.\d+) (.*)")
EXEC = re.compile(r'execve\("([^"]*)", \[(.*?)\](?:, 0x|\.\.\.|$)')

# (kind, command-name test, argv test): the first that matches names the process
KINDS: list[tuple[str, str, str]] = [
    ("strace (the census's own cost)", r"^strace$", r""),
    ("pytest worker (xdist)", r"^python", r"exec\(eval\(sys\.stdin\.readline"),
    ("ansible module, sshd node (/usr/bin/python3)", r"^python", r'^"/usr/bin/python3"$'),
    ("ansible module, local connection", r"^python", r'^"[^"]*/python[0-9.]*"$'),
    ("ansible-playbook (controller)", r"^ansible-playboo", r"."),
    ("ansible-playbook forks (workers)", r"^ansible-playboo", r"^$"),
    ("envbuild CLI subprocess", r"^(python|envbuild)", r'"-m", "envbuild"|/bin/envbuild"'),
    ("import check (an environment's)", r"^python", r"import importlib, sys"),
    ("smoke: all-reduce (collective.py and its ranks)", r"^python", r"collective|multiprocessing\.spawn"),
    ("smoke: GPT (gpt.py)", r"^python", r"gpt\.py"),
    ("ensurepip (python -m venv with pip)", r"^python", r'"-m", "ensurepip"|"ignore::DeprecationWarning", "-c"'),
    ("pip", r"^python", r'"-m", "pip"|pip/__pip-runner__|pip-[0-9.]+-py3-none-any\.whl'),
    ("setup.py builds", r"^python", r"setup\.py"),
    ("other python", r"^python", r""),
    ("uv", r"^uv$", r""),
    ("podman and its helpers", r"^(podman|exe|conmon|crun|buildah|memfd:buildah)", r""),
    ("C/C++ compilers", r"^(cc1plus|cc1|as|ld|collect2|g\+\+|gcc)$", r""),
    ("sshd and ssh", r"^(sshd|ssh)$", r""),
    ("git", r"^git", r""),
    ("slurm", r"^(slurm|srun|sbatch|salloc|sacct|squeue|scontrol|munge)", r""),
    ("shells and coreutils", r"^(sh|bash|rm|cat|head|mkdir|mkfifo|sleep|date|tr|cut|sed|awk|grep|mktemp|timeout|true)$", r""),
    ("everything else", r"", r""),
]


def tod(text: str) -> float:
    h, m, s = text.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def execs_by_pid(path: Path) -> dict[int, list[tuple[float, str]]]:
    """pid -> [(time of day, argv text)] of its successful execs, in order."""
    out: dict[int, list[tuple[float, str]]] = collections.defaultdict(list)
    pending: dict[int, tuple[float, str]] = {}
    with path.open(errors="replace") as fh:
        for line in fh:
            m = LINE.match(line)
            if not m:
                continue
            pid, t, rest = int(m.group(1)), tod(m.group(2)), m.group(3).rstrip()
            if rest.startswith("execve("):
                e = EXEC.match(rest)
                argv = e.group(2) if e else ""
                if rest.endswith("<unfinished ...>"):
                    pending[pid] = (t, argv)
                elif rest.endswith(") = 0"):
                    out[pid].append((t, argv))
            elif rest.startswith("<... execve resumed>"):
                if pid in pending and rest.endswith("= 0"):
                    out[pid].append(pending[pid])
                pending.pop(pid, None)
    return out


def accounting(path: Path) -> list[dict]:
    text = subprocess.run(["dump-acct", str(path)], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split("|")]
        try:
            start = datetime.datetime.strptime(f[14], "%a %b %d %H:%M:%S %Y")
        except (IndexError, ValueError):
            continue
        rows.append({"comm": f[0], "cpu_s": (float(f[2]) + float(f[3])) / 100, "elapsed_s": float(f[4]) / 100,
                     "pid": int(f[9]), "start": start.hour * 3600 + start.minute * 60 + start.second})
    return rows


def kind_of(comm: str, argv: str) -> str:
    for kind, by_comm, by_argv in KINDS:
        if re.search(by_comm, comm) and (not by_argv or re.search(by_argv, argv)):
            return kind
    return "everything else"


def census(exec_log: Path, acct: Path) -> dict:
    execs = execs_by_pid(exec_log)
    cpu: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for r in accounting(acct):
        life = [a for t, a in execs.get(r["pid"], []) if r["start"] - 1.5 <= t <= r["start"] + r["elapsed_s"] + 1.5]
        kind = kind_of(r["comm"], life[-1] if life else "")
        cpu[kind] += r["cpu_s"]
        count[kind] += 1
    return {"cpu_s": round(sum(cpu.values()), 1), "processes": sum(count.values()),
            "kinds": [{"kind": k, "cpu_s": round(v, 1), "processes": count[k]} for k, v in cpu.most_common()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exec_log", type=Path, help="strace -f -tt -e trace=execve output")
    ap.add_argument("acct", type=Path, help="the process accounting file (accton)")
    ap.add_argument("--label", default="", help="what was run (stored with the row)")
    ap.add_argument("--out", type=Path, help="append the row to this JSON list")
    args = ap.parse_args(argv)
    row = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "label": args.label, **census(args.exec_log, args.acct)}
    for k in row["kinds"]:
        print(f"{k['cpu_s']:8.1f} {k['processes']:7d}  {k['kind']}")
    print(f"{row['cpu_s']:8.1f} {row['processes']:7d}  all")
    if args.out:
        rows = json.loads(args.out.read_text()) if args.out.exists() else []
        rows.append(row)
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
