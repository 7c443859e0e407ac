"""The report flow: a run's verification report, its artifact appendix, or committed results
judged again; with a key, the report's provenance signed beside it (``envbuild.flows.signing``).

``report(ReportRequest(...)) -> ReportOutcome``: the text (written atomically at ``output``
when one is given, else for the caller to print), the exit code and, when the verdict is not
PASS, its summary. A run folder (``run_dir``, default runs/latest) is collected and rendered
(``envbuild.report``); a folder of committed records without a ``nodes/`` folder is judged again
under today's rules (``envbuild.report.rejudge``); ``appendix`` writes the run's artifact
appendix (``envbuild.report.appendix``). A signed report's statement names the report file by
sha256 and every file of the run folder but its job/ outputs and logs, by sha256.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envbuild.display import json_visible, visible
from envbuild.errors import NOT_JUDGED, InputError
from envbuild.flows.signing import Stamp, beside, sign_provenance, signer
from envbuild.fsio import write_atomic

if TYPE_CHECKING:
    from envbuild.report.model import Report
    from envbuild.report.rejudge import Record


@dataclass(frozen=True)
class ReportRequest:
    """The run folder (None: runs/latest) or folder of committed results, the format (``fmt``:
    html, md or json; None: from ``output``'s suffix, else md), the file to write, the recipe to
    judge committed records as (``as_recipe``), ``appendix``, the site's ``templates_dir``, and
    ``sign_key`` with ``valid_days`` to sign the report's provenance."""

    run_dir: Path | None = None
    fmt: str | None = None
    output: Path | None = None
    as_recipe: str | None = None
    appendix: bool = False
    templates_dir: Path | None = None
    sign_key: Path | None = None
    valid_days: float | None = None


@dataclass(frozen=True)
class ReportOutcome:
    """The text, the file it was written to (None: print it), the report's signed envelope (or
    the stale one removed), the exit code (0 PASS, 1 FAIL, 5 NOT JUDGED) and the verdict's summary when not PASS."""

    text: str
    output: Path | None = None
    provenance: Path | None = None
    exit_code: int = 0
    summary: str | None = None
    removed: Path | None = None  # the stale signature of an earlier report at ``output``, removed


def report(request: ReportRequest) -> ReportOutcome:
    """Write (or return) the report asked for (see the module docstring)."""
    from envbuild.render.sitetemplates import read_site
    from envbuild.report import collect, render
    from envbuild.verify import resolve_run

    run_dir, output = request.run_dir, request.output
    fmt = request.fmt or {".html": "html", ".htm": "html", ".json": "json"}.get(output.suffix if output else "", "md")
    if request.appendix:
        _unsigned(request, "--appendix")
        return _appendix(run_dir, fmt, output, request.as_recipe)
    if run_dir is not None and run_dir.is_dir() and not (run_dir / "nodes").is_dir():
        from envbuild.report import rejudge

        if records := rejudge.find(run_dir, request.as_recipe):
            _unsigned(request, "a report of committed results")
            return _rejudged(run_dir, records, fmt, output)
    if run_dir is not None and not (run_dir / "run.json").exists():
        raise InputError(f"{run_dir} is not a run directory (no run.json) and holds no native.out record",
                         hint="pass a folder under $ENVBUILD_HOME/runs/ (or none for runs/latest), or a folder "
                              "of committed results")
    if request.sign_key is not None and output is None:
        raise InputError("--sign-key signs a report file: give -o FILE", hint="add -o report.html (or .md, .json)")
    sig = signer(request.sign_key, request.valid_days)  # an unusable key is refused before anything is written
    site = read_site(request.templates_dir) if request.templates_dir else ()
    folder = resolve_run(run_dir)
    made = collect(folder)
    text = render(made, fmt, site)
    if fmt == "json":  # pydantic leaves DEL and C1 raw in strings: U+009B is CSI to a terminal
        text = json_visible(text)
    provenance = removed = None
    if output:
        write_atomic(output, text)
        # with a key, signed; without one, a signature left by an earlier report at this path
        # (which names that report's sha256, not this one's) is removed, as bundle and pack do
        signed = sign_provenance(beside(output), sig, lambda stamp: _statement(output, folder, made, stamp))
        provenance, removed = signed.provenance, signed.removed
    status = made.verdict.status
    return ReportOutcome(text, output, provenance, 0 if status == "PASS" else NOT_JUDGED if status == "NOT JUDGED" else 1,
                         None if status == "PASS" else made.verdict.summary(), removed)


def _statement(output: Path, folder: Path, report: Report, stamp: Stamp) -> dict:
    """The report's in-toto statement: the report file by sha256, made from the run's records
    (every file of the run folder but its job/ outputs and logs, by sha256), made and finished
    when signed."""
    from envbuild.bundle.provenance import REPORT_BUILD_TYPE, statement
    from envbuild.fsio import sha256_file

    inputs = {f"run:{p.relative_to(folder).as_posix()}": sha256_file(p) for p in sorted(folder.rglob("*"))
              if p.is_file() and not p.is_symlink() and p.relative_to(folder).parts[0] not in ("job", "logs")}
    return statement(output.name, sha256_file(output), recipe=report.run.recipe, target=report.run.target,
                     lock_digest=report.recipe.lock_digest or "", inputs=inputs, git=[],
                     build_type=REPORT_BUILD_TYPE,
                     parameters={"run": report.run.run_id, "verdict": report.verdict.status},
                     **(stamp.fields() | {"started": stamp.finished}))


def _unsigned(request: ReportRequest, what: str) -> None:
    """--sign-key signs a run's report (its statement names the run's records): refused for
    ``what``, whose statement envbuild does not make, rather than written unsigned."""
    if request.sign_key is not None:
        raise InputError(f"--sign-key signs the report of a run folder, not {what}",
                         hint="drop --sign-key, or report a run folder (under $ENVBUILD_HOME/runs/)")


def _written(text: str, output: Path | None, exit_code: int = 0) -> ReportOutcome:
    removed = None
    if output:
        write_atomic(output, text)
        # unsigned: a signature an earlier report left beside it names that report, not this one
        removed = sign_provenance(beside(output), signer(None, None), lambda _stamp: {}).removed
    return ReportOutcome(text, output, exit_code=exit_code, removed=removed)


def _appendix(run_dir: Path | None, fmt: str, output: Path | None, as_recipe: str | None) -> ReportOutcome:
    """``--appendix``: of a run folder, or of one committed run (its run.json and its record)."""
    from envbuild.inputs import find_lock
    from envbuild.lock.serialize import lock_digest
    from envbuild.recipes import load_recipe
    from envbuild.record import RunRecord
    from envbuild.report import appendix as A, collect, rejudge
    from envbuild.targets import load_target
    from envbuild.verify import resolve_run

    if fmt not in ("md", "html"):
        raise InputError(f"the appendix is written as md or html, not {fmt}", hint="--format md or html")
    folder = resolve_run(run_dir) if run_dir is None or (run_dir / "nodes").is_dir() else run_dir
    if (folder / "nodes").is_dir():
        report, lock = collect(folder), None
        record = RunRecord.load(folder)
        if record.lock_file.exists():
            from envbuild.lock.serialize import parse_lock

            lock = parse_lock(record.lock_file.read_text(), record.lock_file)
    else:
        records = [r for r in rejudge.find(folder, as_recipe) if "/" not in r.record]
        if len(records) != 1:
            raise InputError(f"{folder}: the appendix of committed results is of one run: its run.json and "
                             f"one native record beside it ({len(records)} found)",
                             hint="pass one run's folder, e.g. docs/results/h100x4-run9/alpa-run2")
        rec = load_recipe(records[0].recipe) if records[0].recipe else None
        (judged,) = rejudge.judge_all(folder, records, {rec.name: rec} if rec else {})
        report, lock = rejudge.as_report(folder, judged, rec.published.url if rec else None), None
        try:  # the shipped lock, where it is the one the run used
            shipped = find_lock(load_recipe(report.run.recipe), load_target(report.run.target))
            lock = shipped if shipped is not None and lock_digest(shipped) == report.recipe.lock_digest else None
        except InputError:
            lock = None
    appx = A.build(report, load_recipe(report.run.recipe), lock)
    return _written(visible(A.to_html(appx) if fmt == "html" else A.to_markdown(appx)), output)


def _rejudged(root: Path, records: list[Record], fmt: str, output: Path | None) -> ReportOutcome:
    """Committed results judged again (``envbuild.report.rejudge``)."""
    import json

    from envbuild import __version__
    from envbuild.recipes import load_recipe
    from envbuild.report import rejudge

    if fmt == "html":
        raise InputError("committed results judged again are written as md or json", hint="--format md or json")
    recipes = {}
    for name in {r.recipe for r in records if r.recipe}:
        try:
            recipes[name] = load_recipe(name)
        except InputError:
            pass  # shown as "not known" beside its record
    judged = rejudge.judge_all(root, records, recipes)
    text = (json.dumps(rejudge.to_dict(root, judged), indent=2, sort_keys=True) + "\n" if fmt == "json"
            else visible(rejudge.to_markdown(root, judged, __version__)))
    return _written(text, output, rejudge.exit_code(judged))
