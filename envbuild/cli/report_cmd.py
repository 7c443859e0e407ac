"""envbuild report, envbuild verify, envbuild diff."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from envbuild.cli.tables import FoldingTable as Table

from envbuild.cli import cli
from envbuild.cli.options import hosts_option, identity_option, target_option, valid_days_option
from envbuild.cli.options import valid_days as _valid_days
from envbuild.cli.output import console, emit_json
from envbuild.display import json_visible, visible
from envbuild.errors import NOT_JUDGED, CheckFailed, EnvironmentProblem, InputError


@cli.command("report")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["html", "md", "json"]), default=None,
              help="Output format (default: from -o's suffix, else md).")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write to FILE (atomically) instead of stdout.")
@click.option("--as-recipe", "as_recipe", default=None, metavar="NAME",
              help="Judge committed records as this recipe's, where nothing beside a record names it.")
@click.option("--appendix", is_flag=True,
              help="Write the run's artifact appendix instead (md or html): the checklist a reviewer is "
                   "asked for, item by item with the run's evidence or a stated gap.")
@click.option("--templates", "templates_dir", type=click.Path(file_okay=False, path_type=Path),
              help="A folder of the site's own report.html.j2 / report.md.j2, each extending envbuild's and "
                   "overriding its blocks (a footer, a section left out, ...): docs/reports.md.")
@click.option("--sign-key", "sign_key", type=click.Path(dir_okay=False, path_type=Path),
              help="With -o: sign the report's provenance (an in-toto statement naming the report's sha256 and "
                   "the run records it was made from) with this Ed25519 key, written as OUTPUT.intoto.jsonl; "
                   "`envbuild attest OUTPUT --trusted-key KEY.pub` checks it.")
@valid_days_option
def report_cmd(run_dir: Path | None, fmt: str | None, output: Path | None, as_recipe: str | None,
               appendix: bool, templates_dir: Path | None, sign_key: Path | None,
               valid_days: float | None = None) -> None:
    """Write the verification report of a run (default: $ENVBUILD_HOME/runs/latest).

    Exit 0: the verdict is PASS; 1: FAIL; 5: NOT JUDGED (nothing failed, but no threshold decided
    it: the report says what was not measured). The report is written all the same.

    A folder of committed results (docs/results/RUN: raw native.out records, without the run's
    nodes/ folder) is judged again under today's rules: each record read by today's judge, beside
    the verdict stored with it that day (Markdown or JSON; exit 0 all PASS, 1 one FAILs, 5 else).

    \b
    envbuild report                                  # Markdown of the latest run
    envbuild report RUN_DIR --format html -o report.html
    envbuild report docs/results/h100x4-run9         # committed runs, judged again
    envbuild report --appendix -o appendix.html      # the artifact appendix of the latest run
    """
    from envbuild.fsio import write_atomic
    from envbuild.report import collect, render
    from envbuild.verify import resolve_run

    if fmt is None:
        fmt = {".html": "html", ".htm": "html", ".json": "json"}.get(output.suffix if output else "", "md")
    days = _valid_days(valid_days, sign_key)
    if appendix:
        return _appendix(run_dir, fmt, output, as_recipe)
    if run_dir is not None and run_dir.is_dir() and not (run_dir / "nodes").is_dir():
        from envbuild.report import rejudge

        if records := rejudge.find(run_dir, as_recipe):
            return _rejudged(run_dir, records, fmt, output)
    if run_dir is not None and not (run_dir / "run.json").exists():
        raise InputError(f"{run_dir} is not a run directory (no run.json) and holds no native.out record",
                         hint="pass a folder under $ENVBUILD_HOME/runs/ (or none for runs/latest), or a folder "
                              "of committed results")
    from envbuild.render.sitetemplates import read_site

    if sign_key is not None:
        if output is None:
            raise InputError("--sign-key signs a report file: give -o FILE", hint="add -o report.html (or .md, .json)")
        from envbuild.bundle.provenance import load_key

        load_key(sign_key, private=True)  # an unusable key is refused before anything is written
    site = read_site(templates_dir) if templates_dir else ()
    folder = resolve_run(run_dir)
    report = collect(folder)
    text = render(report, fmt, site)
    if fmt == "json":  # pydantic leaves DEL and C1 raw in strings: U+009B is CSI to a terminal
        text = json_visible(text)
    if output:
        write_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
        if sign_key is not None:
            click.echo(f"wrote {_sign_report(output, folder, report, sign_key, days)}", err=True)
    else:
        sys.stdout.write(text)
    if report.verdict.status != "PASS":
        sys.stdout.flush()
        click.echo(report.verdict.summary(), err=True)
        raise click.exceptions.Exit(NOT_JUDGED if report.verdict.status == "NOT JUDGED" else 1)


def _sign_report(output: Path, folder: Path, report, key: Path, days: float) -> Path:
    """The report's signed in-toto statement beside it: the report file by sha256, made from the
    run's records (every file of the run folder but its job/ outputs and logs, by sha256)."""
    from envbuild import __version__
    from envbuild.bundle.provenance import REPORT_BUILD_TYPE, sign, statement, utc_now, write_envelope
    from envbuild.fsio import sha256_file
    from envbuild.shipped import checkout_commit

    inputs = {f"run:{p.relative_to(folder).as_posix()}": sha256_file(p) for p in sorted(folder.rglob("*"))
              if p.is_file() and not p.is_symlink() and p.relative_to(folder).parts[0] not in ("job", "logs")}
    now = utc_now()
    stmt = statement(output.name, sha256_file(output), recipe=report.run.recipe, target=report.run.target,
                     lock_digest=report.recipe.lock_digest or "", inputs=inputs, git=[],
                     envbuild_version=__version__, envbuild_commit=checkout_commit(), started=now, finished=now,
                     build_type=REPORT_BUILD_TYPE, valid_days=days,
                     parameters={"run": report.run.run_id, "verdict": report.verdict.status})
    return write_envelope(output, sign(stmt, key))


@cli.command("attest")
@click.argument("artifact", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--trusted-key", "trusted_keys", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A public key (Ed25519, PEM or OpenSSH) whose signature you trust (repeatable).")
@click.option("--provenance", type=click.Path(dir_okay=False, path_type=Path),
              help="The signed statement [ARTIFACT.intoto.jsonl].")
@click.option("--kind", type=click.Choice(["report", "bundle", "pack"]), default="report", show_default=True,
              help="What ARTIFACT is: a report (envbuild report --sign-key), a bundle (envbuild bundle --sign-key) "
                   "or a packed environment (envbuild pack --sign-key).")
@click.option("--json", "as_json", is_flag=True, help="Print the verified statement as JSON.")
def attest_cmd(artifact: Path, trusted_keys: tuple[Path, ...], provenance: Path | None, kind: str,
               as_json: bool) -> None:
    """Check an artifact's signed provenance: a trusted key signed it and it names this file.

    Exit 0 with what the statement says (its subject's name and sha256, when it was made and
    when it expires, the recipe, target, run and verdict it was made from, its inputs by
    sha256); 1 when no trusted key signed it, it has expired (or states no expiry), its subject
    is another file (other bytes, or another name: a statement vouches for the file it names),
    or it is no in-toto statement of that kind. Offline.

    \b
    envbuild report -o report.html --sign-key ~/.ssh/id_ed25519
    envbuild attest report.html --trusted-key maker.pub
    """
    import json

    from envbuild.bundle import provenance as P

    stmt = P.verify(artifact, provenance or P.envelope_path(artifact), list(trusted_keys), kind=kind)
    if as_json:
        click.echo(json.dumps(stmt, indent=2, sort_keys=True))
        return
    from envbuild.display import visible

    # the statement's values are the signer's text: shown with control bytes escaped
    params = stmt["predicate"]["buildDefinition"]["externalParameters"]
    deps = stmt["predicate"]["buildDefinition"]["resolvedDependencies"]
    subject = stmt["subject"][0]
    meta = stmt["predicate"].get("runDetails", {}).get("metadata", {})
    click.echo(visible(f"{artifact.name}: signed by a trusted key; subject {subject['name']} (the file's name), "
                       f"sha256 {subject['digest']['sha256']}, made {meta.get('finishedOn', 'not recorded')}, "
                       f"expires {meta.get(P.EXPIRES)}"))
    click.echo(visible("made from: " + ", ".join(f"{k} {v}" for k, v in params.items())))
    click.echo(visible(f"inputs: {len(deps)} file(s) by sha256; builder "
                       f"{stmt['predicate']['runDetails']['builder']['id']}"))


def _appendix(run_dir: Path | None, fmt: str, output: Path | None, as_recipe: str | None) -> None:
    """``--appendix``: of a run folder, or of one committed run (its run.json and its record)."""
    from envbuild.fsio import write_atomic
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
    text = visible(A.to_html(appx) if fmt == "html" else A.to_markdown(appx))
    if output:
        write_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)


def _rejudged(root: Path, records, fmt: str, output: Path | None) -> None:
    """Committed results judged again (``envbuild.report.rejudge``)."""
    import json

    from envbuild import __version__
    from envbuild.fsio import write_atomic
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
    if output:
        write_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)
    code = rejudge.exit_code(judged)
    if code:
        raise click.exceptions.Exit(code)


@cli.command("verify")
@target_option(required=False, help="Verify the newest run made for this target (when --run is not given).")
@click.option("--hosts", callback=hosts_option,
              help="Nodes to observe: user@host[:port],host2 (default: the run's hosts).")
@click.option("--inventory", type=click.Path(exists=True, dir_okay=False), help="Ansible inventory (INI or YAML).")
@click.option("--local", "local", is_flag=True, help="Observe the environment on this machine.")
@click.option("-i", "--identity", callback=identity_option,
              help="SSH private key, as ssh -i (for --hosts, or hosts the inventory gives none).")
@click.option("--known-hosts", "known_hosts", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="known_hosts file to check host keys against (repeatable; default: $ENVBUILD_KNOWN_HOSTS, "
                   "else ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts, as ssh).")
@click.option("--insecure", is_flag=True, help="Do not check SSH host keys (throwaway test nodes only; warns).")
@click.option("--run", "run", type=click.Path(path_type=Path), help="Run directory (default: runs/latest).")
@click.option("--deep", is_flag=True, help="Hash every installed file against its RECORD (default: only files "
                                           "whose size/mtime/ctime differ from the install-time manifest).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify_cmd(target, hosts, inventory, local, identity, known_hosts, insecure, run, deep, as_json) -> None:
    """Re-observe live environments and report drift from the run's lock and plan.

    Exit 0: clean; 1: drift (package version, commit moved, patch missing, .so hash changed,
    environment variable missing, a step's effect broken: files of a distribution deleted or
    changed, local changes in a source tree, the env file edited); 3: a node could not be observed (unreachable, or its SSH host
    key unknown or changed: host keys are checked as ssh checks them unless --insecure).
    With no --hosts, --inventory or --local, the run's own nodes are observed: this machine for
    a run that provisioned it (``--target local`` without --hosts), else the run's hosts over SSH.

    \b
    envbuild verify --local
    envbuild verify --inventory nodes.yaml --run ~/.envbuild/runs/20250101-120000-r-t
    """
    from envbuild.connect.selection import NodeSelection
    from envbuild.flows.verify import VerifyRequest, verify_run

    outcome = verify_run(VerifyRequest(
        run=run, target=target, deep=deep,
        nodes=NodeSelection(hosts=hosts, inventory=inventory, local=local, identity_file=identity,
                            known_hosts=tuple(known_hosts), insecure=insecure)))
    run_dir, results = outcome.run_dir, outcome.verdicts
    if as_json:
        emit_json(outcome.to_dict())
    else:
        table = Table(title=f"verify {run_dir.name}")
        for col in ("node", "status", "kind", "subject", "expected", "observed"):
            table.add_column(col)
        for r in results:
            if not r.drift:
                table.add_row(r.node, r.status, "", r.message, "", "")
            for d in r.drift:
                wide = 300 if d.kind == "effect-failed" else 16  # the effect's finding, in full
                table.add_row(r.node, r.status, d.kind, d.subject, (d.expected or "-")[:16], (d.observed or "-")[:wide])
        console.print(table)
    code = outcome.exit_code
    if code == 1:
        bad = [r.node for r in results if r.status == "drift"]
        raise CheckFailed(f"drift on {len(bad)} node(s): {', '.join(bad)}",
                          hint="reprovision those nodes (`envbuild provision`) or record the change in the recipe")
    if code == 3:
        bad = [f"{r.node} ({r.message})" for r in results if r.status == "unreachable"]
        raise EnvironmentProblem(f"could not observe: {'; '.join(bad)}",
                                 hint="check that the node is up and the environment prefix still exists")


@cli.command("diff")
@click.argument("report_a", type=click.Path(path_type=Path))
@click.argument("report_b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
def diff_cmd(report_a: Path, report_b: Path, as_json: bool) -> None:
    """Show what differs between two reports (report JSON files or run directories).

    Exit 1 when the environments differ (fingerprint, packages, SHAs, .so hashes, facts);
    benchmark numbers are shown but do not count as a different environment.
    """
    from dataclasses import asdict

    from envbuild.report.diff import diff_reports, environments_differ, load_report

    diffs = diff_reports(load_report(report_a), load_report(report_b))
    differ = environments_differ(diffs)
    if as_json:
        emit_json({"environments_differ": differ, "differences": [asdict(d) for d in diffs]})
    elif not diffs:
        console.print("identical: same fingerprint, pins, facts and benchmark numbers")
    else:
        table = Table(title="environments differ" if differ else "same environment (only numbers differ)")
        for col in ("area", "node", "subject", "A", "B"):
            table.add_column(col)
        for d in diffs:
            table.add_row(d.area, d.host or "", d.subject, d.a or "-", d.b or "-")
        console.print(table)
    if differ:
        raise CheckFailed("the environments differ", hint="see the table above; `envbuild report` shows each side")
