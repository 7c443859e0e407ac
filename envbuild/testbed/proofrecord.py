"""Which CPU import proofs a test run carries out, and the record of the last proof of each.

A proof (tests/testbed/test_import_proof.py) builds a recipe's environment from its lock and imports
what its entry scripts import: minutes per recipe. Its outcome depends on its inputs: the
recipe (what it installs: its digest), its lock for the CPU target, its import fact, and the code
that installs (the actions layer and the proof itself). ``inputs_digest`` hashes those; ``docs/results/import-
proofs.json`` records, per recipe, the digest its last passing proof ran on, with the date,
the commit and the command (written by a passing proof when ``ENVBUILD_RECORD_PROOFS=1``).

A run proves (``select``):
- every recipe whose inputs differ from its record (or that has none): ``changed``;
- one more, in a fixed rotation over the recipes in name order, advanced by the commit count
  of the checkout (``git rev-list --count HEAD``), so successive landings prove each recipe
  in turn: ``rotation``;
- all of them under ``pytest -m proof`` (or ``ENVBUILD_PROOFS=all``).
The others are skipped with their record's date and commit in the reason. The selection is
printed in pytest's header.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.recipes import all_recipes
from envbuild.shipped import CHECKOUT, LOCKFILES, RECIPES, SCRIPT_IMPORTS
from envbuild.targets import load_target

ROOT = CHECKOUT
RECORD = ROOT / "docs" / "results" / "import-proofs.json"
PACKAGE = ROOT / "envbuild"
# the code whose change can change any proof's outcome: how steps install, how the proof runs
CODE = [PACKAGE / "actions" / "steps.py", PACKAGE / "node" / "actions.py",
        PACKAGE / "testbed" / "importproof.py", ROOT / "tests" / "testbed" / "test_import_proof.py"]


def cpu_target(recipe):
    """The recipe's CPU target (no GPUs), else its first target: where its proof builds."""
    targets = [load_target(t) for t in recipe.targets]
    return next((t for t in targets if t.gpus is None), targets[0])


def proof_pairs() -> list[tuple[str, str]]:
    """(recipe, CPU target) of every recipe with entry scripts: the proofs there are."""
    return [(r.name, cpu_target(r).name) for r in all_recipes() if r.entry_scripts]


def input_files(recipe: str, target: str) -> list[Path]:
    """The files a proof of ``recipe`` on ``target`` depends on."""
    return [path for _, path in labelled_inputs(recipe, target)]


def labelled_inputs(recipe: str, target: str) -> list[tuple[str, Path]]:
    """(label, file) of each input: the label names the file's role (``recipe:``, ``lock:``,
    ``imports:``, ``code:``) and its name within that role's folder, not where the folder lies,
    so moving a folder (the locks went from envbuild/lockfiles/ to lockfiles/) changes no digest,
    while a file that becomes another recipe's or target's does."""
    return [(f"recipe:{recipe}.yaml", RECIPES / f"{recipe}.yaml"),
            (f"lock:{recipe}/{target}.lock", LOCKFILES / recipe / f"{target}.lock"),
            (f"imports:{recipe}.yaml", SCRIPT_IMPORTS / f"{recipe}.yaml"),
            *((f"code:{path.relative_to(ROOT).as_posix()}", path) for path in CODE)]


def _content(label: str, path: Path) -> bytes:
    """What of an input the proof depends on: a recipe's digest (``envbuild.catalog.digest``:
    what it installs, not its expected resources, errata, thresholds or launch layouts, which no
    proof reads), every other file's bytes."""
    if not path.is_file():
        return b"<absent>"
    if label.startswith("recipe:"):
        from envbuild.catalog import digest
        from envbuild.recipes import load_recipe

        return digest(load_recipe(path)).encode()
    return path.read_bytes()


def inputs_digest(recipe: str, target: str) -> str:
    h = hashlib.sha256()
    for label, path in labelled_inputs(recipe, target):
        h.update(label.encode() + b"\0")
        h.update(_content(label, path))
        h.update(b"\0")
    return h.hexdigest()


def read_record(path: Path = RECORD) -> dict:
    if not path.is_file():
        return {}
    return json.loads(path.read_text()).get("proofs", {})


def write_record(recipe: str, entry: dict, path: Path = RECORD) -> None:
    """Put ``entry`` in the record as ``recipe``'s; proofs of one run write it from several
    xdist workers, so each read-modify-write holds a lock beside the file."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proofs = read_record(path)
        proofs[recipe] = entry
        body = {"about": "the last passing CPU import proof of each recipe (tests/testbed/test_import_proof.py); "
                         "envbuild.testbed.proofrecord says how a test run uses it",
                "proofs": dict(sorted(proofs.items()))}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=1) + "\n")
        os.replace(tmp, path)


def commit_count() -> int | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--count", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip().isdigit() else None


def head_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


@dataclass
class Selection:
    run: dict[str, str] = field(default_factory=dict)  # recipe -> why it runs
    skip: dict[str, str] = field(default_factory=dict)  # recipe -> why not

    def header(self) -> str:
        ran = ", ".join(f"{r} ({why})" for r, why in self.run.items()) or "none"
        return (f"import proofs: {ran}; {len(self.skip)} unchanged since their recorded proof "
                f"({RECORD.relative_to(ROOT)}); `pytest -m proof` runs all")


def select(pairs: list[tuple[str, str]], *, run_all: bool, record: dict | None = None,
           count: int | None = None) -> Selection:
    """``pairs``: (recipe, target) of every proof, in any order."""
    record = read_record() if record is None else record
    out = Selection()
    unchanged = []
    for recipe, target in sorted(pairs):
        last = record.get(recipe) or {}
        if run_all:
            out.run[recipe] = "all proofs asked for"
        elif last.get("target") != target or last.get("inputs") != inputs_digest(recipe, target):
            out.run[recipe] = "inputs changed since its record" if last else "no recorded proof"
        else:
            unchanged.append(recipe)
    if unchanged:  # the rotation's turn, else the next unchanged recipe after it
        names = sorted(r for r, _t in pairs)
        n = count if count is not None else commit_count()
        start = (n or 0) % len(names)
        turn = next(names[(start + i) % len(names)] for i in range(len(names))
                    if names[(start + i) % len(names)] in unchanged)
        out.run[turn] = f"rotation: commit count {n} mod {len(names)} = {start}"
        for recipe in unchanged:
            if recipe != turn:
                last = record[recipe]
                out.skip[recipe] = (f"inputs unchanged since its proof of {last.get('date')} at commit "
                                    f"{(last.get('commit') or '?')[:12]}; not this run's rotation "
                                    "(pytest -m proof runs it)")
    return out
