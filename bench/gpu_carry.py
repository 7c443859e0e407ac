"""What bench/gpu_prepare.sh needs from a plan of bench/gpu_session.sh, and how to carry what it
made to a GPU machine that receives at most 64 MiB per call, the working tree included.

    python bench/gpu_carry.py jobs PLAN            # one "JOB RECIPE" line per job the plan installs
    python bench/gpu_carry.py split [--limit-mib 64] [--plan-path .device/plan.txt]
                                                   # the calls, their carry and their commands

``plan_jobs`` and ``carry_split`` are pure (text and sizes in, jobs and calls out); ``main``
measures: the working tree as the device copies it (tracked files and untracked files git does
not ignore, apparent sizes, as ``git ls-files -z | du --files0-from=- -cb`` counts) and each
folder under ``.device/``. Call 1 carries ``.device/common`` (envbuild's wheels, the commit's
export, the stall tools) and the plan; each bundle, in the order the plan installs them, goes to
the first call with room for it (first fit: as many as fit come in call 1), or to a new call
beside the working tree. A call names at most 8 carried paths (the device's limit). A bundle that
cannot fit even alone beside the working tree is an error (exit 1) naming it.

Exit codes: 0 printed; 1 something cannot be carried; 2 bad input (a plan line, a missing folder).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LIMIT_MIB = 64
MAX_PATHS = 8
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
GPUS = re.compile(r"^[0-9]+(,[0-9]+)*$")
SESSION = "bash bench/gpu_session.sh"


class CarryError(Exception):
    """Input the split cannot use (exit 2) or a carry that cannot be made (exit 1)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Item:
    path: str  # relative to the repository root, as the device's carry names it
    size: int  # bytes


@dataclass(frozen=True)
class Call:
    carry: tuple[str, ...]
    size: int  # bytes carried, the working tree included
    command: str


def plan_jobs(text: str, name: str = "plan") -> list[tuple[str, str]]:
    """The (job, recipe) pairs a plan installs, in the order it first installs them.

    A plan line is a verb and items (bench/gpu_session.sh's header): ``JOB=RECIPE`` installs,
    ``JOB@GPUS`` a smoke of a job an earlier item installed, ``load@GPUS`` a co-located load,
    ``wipe:JOB`` the removal of the environment of a job an earlier item installed."""
    jobs: dict[str, str] = {}
    for no, raw in enumerate(text.splitlines(), 1):
        words = raw.split()
        if not words or words[0].startswith("#"):
            continue
        where = f"{name}:{no}"
        if len(words) < 2:
            raise CarryError(f"{where}: a plan line is a verb and items, got {raw.strip()!r}", 2)
        for item in words[1:]:
            if item.startswith("wipe:"):
                if item[len("wipe:"):] not in jobs:
                    raise CarryError(f"{where}: {item!r}: no earlier item installs {item[len('wipe:'):]}", 2)
            elif "=" in item:
                job, recipe = item.split("=", 1)
                if not NAME.match(job) or not NAME.match(recipe) or job == "common":
                    raise CarryError(f"{where}: {item!r}: an install is JOB=RECIPE, both names "
                                     "([A-Za-z0-9._-]), the job not 'common'", 2)
                if jobs.get(job, recipe) != recipe:
                    raise CarryError(f"{where}: job {job} is {jobs[job]}, not {recipe}", 2)
                jobs[job] = recipe
            elif "@" in item:
                job, gpus = item.split("@", 1)
                if not GPUS.match(gpus):
                    raise CarryError(f"{where}: {item!r}: GPUS is a comma-separated list of indexes", 2)
                if job != "load" and job not in jobs:
                    raise CarryError(f"{where}: {item!r}: no earlier item installs {job} ({job}=RECIPE)", 2)
            else:
                raise CarryError(f"{where}: {item!r} is neither JOB=RECIPE, JOB@GPUS, load@GPUS nor wipe:JOB", 2)
    if not jobs:
        raise CarryError(f"{name}: no JOB=RECIPE item: nothing to prepare", 2)
    return list(jobs.items())


def carry_split(tree: int, first: list[Item], bundles: list[Item], plan_path: str,
                limit: int = LIMIT_MIB << 20, max_paths: int = MAX_PATHS) -> list[Call]:
    """The device calls that carry ``first`` (call 1) and ``bundles`` (in order) with a working
    tree of ``tree`` bytes, each call at most ``limit`` bytes and ``max_paths`` carried paths."""
    mib = limit / (1 << 20)
    base = tree + sum(i.size for i in first)
    if base > limit:
        raise CarryError(f"the working tree ({tree / (1 << 20):.1f} MiB) and "
                         f"{', '.join(i.path for i in first)} ({(base - tree) / (1 << 20):.1f} MiB) "
                         f"pass the {mib:g} MiB of one call", 1)
    for b in bundles:
        if tree + b.size > limit:
            raise CarryError(f"{b.path} ({b.size / (1 << 20):.1f} MiB) cannot travel: with the working tree "
                             f"({tree / (1 << 20):.1f} MiB) it passes the {mib:g} MiB of one call", 1)
    start = f"{SESSION} stage && {SESSION} start {plan_path} && {SESSION} wait 15"
    calls: list[tuple[list[str], int]] = [([i.path for i in first], base)]
    for b in bundles:  # first fit: each bundle in the first call with room, so it comes early
        for n, (carry, size) in enumerate(calls):
            if size + b.size <= limit and len(carry) < max_paths:
                calls[n] = ([*carry, b.path], size + b.size)
                break
        else:
            calls.append(([b.path], tree + b.size))
    later = f"{SESSION} stage && {SESSION} wait 15"
    return [Call(tuple(carry), size, start if n == 0 else later) for n, (carry, size) in enumerate(calls)]


PART_ROOM = 1 << 20  # what a part leaves of a call beside the working tree (the sha256, the count)


def part_size(tree: int, limit: int) -> int:
    """The largest part of a bundle that travels in one call beside a working tree of ``tree`` bytes.

    >>> part_size(20 << 20, 64 << 20) == (43 << 20)
    True
    """
    room = limit - tree - PART_ROOM
    if room < (1 << 20):
        raise CarryError(f"the working tree ({tree / (1 << 20):.1f} MiB) leaves no room in a call", 1)
    return room


def split_bundle(folder: Path, size: int) -> int:
    """Split ``folder``/bundle.tar into parts of ``size`` bytes when it is bigger: part 00 stays in
    ``folder`` (with ``bundle.parts``, their count), part NN goes to ``folder+NN``; the tar is removed.
    ``bench/gpu_session.sh stage`` joins them when all have come. Returns the count (0: not split)."""
    tar = folder / "bundle.tar"
    if tar.stat().st_size <= size:
        return 0
    n = 0
    with tar.open("rb") as fh:
        while chunk := fh.read(size):
            dest = folder if n == 0 else folder.parent / f"{folder.name}+{n:02d}"
            dest.mkdir(exist_ok=True)
            (dest / f"bundle.part.{n:02d}").write_bytes(chunk)
            n += 1
    (folder / "bundle.parts").write_text(f"{n}\n")
    tar.unlink()
    return n


def render(calls: list[Call], tree: int, limit: int) -> str:
    """The split as the reviewer follows it."""
    mib = 1 << 20
    out = [f"Carry split ({limit / mib:g} MiB a call, the working tree's {tree / mib:.1f} MiB included), "
           "calls back to back (a machine idle for 30 s is given back with everything on it):"]
    for n, call in enumerate(calls, 1):
        out.append(f"  call {n} ({call.size / mib:.1f} MiB): carry {json.dumps(list(call.carry))}")
        out.append(f"    {call.command}")
    out.append(f"  then, carrying nothing: {SESSION} wait 560   (again until it prints \"session done\")")
    out.append("Exports for the session (STALL=JOB:NAME:SECONDS, LOAD_DUTY, SMOKE) go before `start` in call 1.")
    out.append("If the machine is lost, nothing on it survives: write a plan of the lines not yet run (each "
               "job's install line again), prepare it, and start again from call 1.")
    return "\n".join(out)


def tree_size(root: Path) -> int:
    """Bytes of the working tree as the device copies it: tracked files and untracked files git
    does not ignore (apparent sizes; a file listed but deleted counts nothing)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           check=True, capture_output=True).stdout.split(b"\0")
    total = 0
    for name in {n for n in names if n}:
        try:
            total += os.lstat(root / os.fsdecode(name)).st_size
        except FileNotFoundError:
            continue
    return total


def folder_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("jobs", help="the jobs a plan installs, one 'JOB RECIPE' a line")
    j.add_argument("plan", type=Path)
    pt = sub.add_parser("parts", help="split .device/JOB/bundle.tar into parts when one call cannot carry it")
    pt.add_argument("job")
    pt.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    s = sub.add_parser("split", help="the device calls that carry .device/ (run from the repository root)")
    s.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    s.add_argument("--plan-path", default=".device/plan.txt", help="the plan as carried (default %(default)s)")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "parts":
            root = Path.cwd()
            limit = int(a.limit_mib * (1 << 20))
            n = split_bundle(root / ".device" / a.job, part_size(tree_size(root), limit))
            if n:
                print(f"{a.job}: its bundle travels in {n} parts")
            return 0
        if a.cmd == "jobs":
            if not a.plan.is_file():
                raise CarryError(f"{a.plan}: no such plan file", 2)
            for job, recipe in plan_jobs(a.plan.read_text(), str(a.plan)):
                print(job, recipe)
            return 0
        root, plan = Path.cwd(), Path(a.plan_path)
        if not (root / plan).is_file() or not (root / ".device" / "common").is_dir():
            raise CarryError(f"no {plan} or .device/common here: run bench/gpu_prepare.sh first", 2)
        first = [Item(".device/common", folder_size(root / ".device/common")), Item(str(plan), (root / plan).stat().st_size)]
        bundles = []
        for job, _ in plan_jobs((root / plan).read_text(), str(plan)):
            folder = root / ".device" / job
            if not (folder / "bundle.tar").is_file() and not (folder / "bundle.parts").is_file():
                raise CarryError(f"no {folder.relative_to(root)}/bundle.tar: run bench/gpu_prepare.sh first", 2)
            bundles.append(Item(f".device/{job}", folder_size(folder)))
            for extra in sorted((root / ".device").glob(f"{job}+*")):  # the bundle's later parts
                bundles.append(Item(f".device/{extra.name}", folder_size(extra)))
        tree, limit = tree_size(root), int(a.limit_mib * (1 << 20))
        print(render(carry_split(tree, first, bundles, str(plan), limit), tree, limit))
        return 0
    except CarryError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())
