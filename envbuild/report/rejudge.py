"""Committed results judged again under today's rules (``envbuild report DIR`` on a folder of
docs/results, issue 39).

A committed result keeps the raw record of a native benchmark (``native.out``, or
``<prefix>-native.out`` beside files of the same prefix), its exit status (``native.rc``) and the
node's facts (``facts.json``, or the report written on the node). Its stored verdict
(``smoke.json``'s native section, or ``parse.json``) is what the judge said that day; the judge
of today (``envbuild.smoke.judge``: today's parsers, thresholds and same-GPU references) reads
the raw record again. A record that is itself a reference is never its own yardstick.

``find(root, recipe=None) -> [Record]`` reads what lies in the folder and below it; ``judge_all``
judges each; ``to_markdown`` / ``to_dict`` show them. Reads only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from envbuild.errors import NOT_JUDGED, InputError
from envbuild.fsio import sha256_file
from envbuild.smoke import references as refs
from envbuild.smoke.judge import FAIL, NOTHING_FOUND, PASS, Evidence, Verdict, judge
from envbuild.smoke.logread import read_log

if TYPE_CHECKING:
    from envbuild.report.model import Report

RECORD = "native.out"
SCHEMA = "envbuild.rejudge/1"


class Record(BaseModel):
    """One committed native record and what lies beside it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    record: str  # the raw record, relative to the folder given
    sha256: str
    recipe: str | None
    recipe_from: str | None
    gpu: str | None
    gpu_from: str | None
    gpus: int | None  # where the log does not print it: the stored verdict's count
    rc: int | None
    stored: str | None  # the verdict stored with the record that day
    stored_from: str | None


class Judged(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    record: Record
    now: Verdict | None  # None: the recipe is not known
    why_not: str | None = None

    @property
    def changed(self) -> bool:
        return self.now is not None and self.record.stored is not None and self.now.verdict != self.record.stored


def _json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _sibling(log: Path, name: str) -> Path:
    """``<prefix>-name`` beside ``<prefix>-native.out``, else ``name`` beside ``native.out``."""
    prefix = log.name[: -len(RECORD)]
    return log.with_name(prefix + name)


def _gpu(log: Path, root: Path) -> tuple[str | None, str | None]:
    facts = _sibling(log, "facts.json")
    if (data := _json(facts)) is not None:
        names = sorted({g.get("name") for g in data.get("gpus") or [] if isinstance(g, dict) and g.get("name")})
        if names:
            return ", ".join(names), str(facts.relative_to(root))
    report = _sibling(log, "report.json")
    if (data := _json(report)) is not None:
        for node in data.get("nodes") or []:
            gpu = ((node or {}).get("facts") or {}).get("gpu")
            if gpu:
                return gpu, str(report.relative_to(root))
    return None, None


def _stored(log: Path, root: Path) -> tuple[str | None, str | None, int | None]:
    for name, dig in (("smoke.json", ("native", "verdict")), ("parse.json", ())):
        path = _sibling(log, name)
        data = _json(path)
        for key in dig:
            data = data.get(key) if isinstance(data, dict) else None
        if isinstance(data, dict) and isinstance(data.get("verdict"), str):
            gpus = data.get("gpus") if isinstance(data.get("gpus"), int) else None
            return data["verdict"], str(path.relative_to(root)), gpus
    return None, None, None


def _recipe(log: Path, root: Path, sha: str) -> tuple[str | None, str | None]:
    for name in ("run.json", "report.json"):
        path = _sibling(log, name)
        data = _json(path) or {}
        recipe = data.get("recipe") if name == "run.json" else (data.get("run") or {}).get("recipe")
        if isinstance(recipe, str) and recipe:
            return recipe, str(path.relative_to(root))
    for ref, run in refs.runs():
        if run.sha256 == sha:
            return ref.recipe, "references.json (this record is one of a reference's runs)"
    return None, None


def _rc(log: Path) -> int | None:
    try:
        return int(_sibling(log, "native.rc").read_text().strip())
    except (OSError, ValueError):
        return None


def find(root: Path, recipe: str | None = None) -> list[Record]:
    """Every committed native record under ``root`` (``recipe``: for records that do not say, from --as-recipe)."""
    if not root.is_dir():
        raise InputError(f"{root} is not a folder", hint="pass a folder of docs/results")
    out = []
    for log in sorted(p for p in root.rglob("*" + RECORD) if p.is_file() and
                      (p.name == RECORD or p.name.endswith("-" + RECORD))):
        sha = sha256_file(log)
        name, name_from = (recipe, "--as-recipe") if recipe else _recipe(log, root, sha)
        gpu, gpu_from = _gpu(log, root)
        stored, stored_from, gpus = _stored(log, root)
        out.append(Record(record=str(log.relative_to(root)), sha256=sha, recipe=name, recipe_from=name_from,
                          gpu=gpu, gpu_from=gpu_from, gpus=gpus, rc=_rc(log), stored=stored,
                          stored_from=stored_from))
    return out


def judge_all(root: Path, records: list[Record], recipes: dict[str, Any]) -> list[Judged]:
    """Each record judged by today's judge (``recipes``: name -> Recipe, loaded by the caller)."""
    out = []
    for rec in records:
        recipe = recipes.get(rec.recipe) if rec.recipe else None
        if recipe is None or recipe.benchmark is None:
            why = (f"recipe {rec.recipe} is not known or has no benchmark" if rec.recipe
                   else "nothing beside the record names its recipe: pass --as-recipe NAME")
            out.append(Judged(record=rec, now=None, why_not=why))
            continue
        try:  # streamed, lines cut, the text held bounded (envbuild.smoke.logread)
            text = read_log(root / rec.record, what="native record").text
        except InputError as exc:
            out.append(Judged(record=rec, now=None, why_not=exc.message))
            continue
        now = judge(Evidence(recipe=recipe.name, benchmark=recipe.benchmark, text=text, rc=rec.rc, gpu=rec.gpu,
                             gpus=rec.gpus, record=rec.record, sha256=rec.sha256))
        out.append(Judged(record=rec, now=now))
    return out


def exit_code(judged: list[Judged]) -> int:
    """0: every record PASSes today; 1: one FAILs or holds no figure (or names no recipe);
    5: NOT JUDGED otherwise."""
    verdicts = [j.now.verdict if j.now else None for j in judged]
    if not verdicts or any(v in (FAIL, NOTHING_FOUND, None) for v in verdicts):
        return 1
    return 0 if all(v == PASS for v in verdicts) else NOT_JUDGED


def to_dict(root: Path, judged: list[Judged]) -> dict:
    return {"schema": SCHEMA, "folder": str(root),
            "records": [{**j.record.model_dump(mode="json"), "now": j.now.model_dump(mode="json") if j.now else None,
                         "why_not": j.why_not, "changed": j.changed} for j in judged]}


def _cell(text: str | None) -> str:
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def to_markdown(root: Path, judged: list[Judged], version: str) -> str:
    lines = [f"# Committed results judged again: {root}", "",
             f"The raw records under `{root}`, read by the judge of envbuild {version} (today's parsers, "
             "thresholds and same-GPU references); a record that is itself a reference is never its own "
             "yardstick. \"stored\" is what was recorded beside it that day.", "",
             "| record | recipe | GPU | stored | now | why |", "|---|---|---|---|---|---|"]
    for j in judged:
        r = j.record
        gpu = f"{j.now.gpus or '?'} x {r.gpu}" if j.now and r.gpu else r.gpu
        now = j.now.verdict if j.now else "cannot judge"
        mark = f"**{now}**" + (" (changed)" if j.changed else "")
        lines.append(f"| `{_cell(r.record)}` | {_cell(r.recipe)} | {_cell(gpu)} | {_cell(r.stored)} | {mark} | "
                     f"{_cell(j.now.reason if j.now else j.why_not)} |")
    if not judged:
        lines.append("| - | - | - | - | - | no native record (`native.out`) in the folder |")
    return "\n".join(lines) + "\n"


def as_report(root: Path, judged: Judged, published: str | None = None) -> Report:
    """One committed run (its ``run.json`` and the record beside it) as a report, its benchmark
    the record judged again: what ``envbuild report --appendix`` reads of a committed run. The
    provision's own evidence (observed pins, drift) is not committed, so the report holds none
    and its verdict is the benchmark's."""
    from envbuild.facts.model import NodeFacts
    from envbuild.record import read_run_info
    from envbuild.report.badges import assess, repeatability
    from envbuild.report.bench import judged_fields
    from envbuild.report.collect import facts_summary
    from envbuild.report.model import Benchmark, NodeReport, RecipeInfo, Reason, Report, RunInfo
    from envbuild.report.model import Verdict as ReportVerdict

    run = read_run_info(root)
    log = root / judged.record.record
    facts = None
    if (data := _json(_sibling(log, "facts.json"))) is not None:
        facts = facts_summary(NodeFacts.model_validate(data))
    now = judged.now
    bench = []
    if now is not None:
        bench.append(Benchmark(name=f"native.{now.metric}", value=now.value, unit=now.unit or "",
                               higher_is_better=now.higher_is_better, passed=now.passed,
                               **{**judged_fields(now), "record": judged.record.record}))
    status = now.verdict if now and now.verdict in (PASS, "NOT JUDGED") else FAIL
    reasons = [] if status != FAIL else [Reason(kind="benchmark", message=now.reason if now else
                                                (judged.why_not or "the record was not judged"))]
    report = Report(verdict=ReportVerdict(status=status, reasons=reasons,
                                          not_judged=[now.reason] if now and status == "NOT JUDGED" else []),
                    run=RunInfo(run_id=run.run_id, recipe=run.recipe, target=run.target, status=run.status,
                                started=run.started, finished=run.finished, argv=run.argv, hosts=run.hosts,
                                envbuild_version=run.envbuild_version),
                    recipe=RecipeInfo(name=run.recipe, lock_digest=run.lock_digest, published=published),
                    nodes=[NodeReport(host=(run.hosts or ["node"])[0], facts=facts, benchmarks=bench)])
    report.badges, report.repeatability = assess(report), repeatability(report)
    return report
