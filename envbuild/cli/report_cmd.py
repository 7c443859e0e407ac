"""envbuild report, envbuild verify, envbuild diff."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from envbuild.cli import cli
from envbuild.cli.options import hosts_option, identity_option, target_option
from envbuild.cli.output import console, emit_json
from envbuild.errors import NOT_JUDGED, CheckFailed, EnvironmentProblem, InputError


@cli.command("report")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["html", "md", "json"]), default=None,
              help="Output format (default: from -o's suffix, else md).")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write to FILE (atomically) instead of stdout.")
def report_cmd(run_dir: Path | None, fmt: str | None, output: Path | None) -> None:
    """Write the verification report of a run (default: $ENVBUILD_HOME/runs/latest).

    Exit 0: the verdict is PASS; 1: FAIL; 5: NOT JUDGED (nothing failed, but no threshold decided
    it: the report says what was not measured). The report is written all the same.

    \b
    envbuild report                                  # Markdown of the latest run
    envbuild report RUN_DIR --format html -o report.html
    """
    from envbuild.fsio import write_atomic
    from envbuild.report import collect, render
    from envbuild.verify import resolve_run

    if fmt is None:
        fmt = {".html": "html", ".htm": "html", ".json": "json"}.get(output.suffix if output else "", "md")
    if run_dir is not None and not (run_dir / "run.json").exists():
        raise InputError(f"{run_dir} is not a run directory (no run.json)",
                         hint="pass a folder under $ENVBUILD_HOME/runs/ (or none for runs/latest)")
    report = collect(resolve_run(run_dir))
    text = render(report, fmt)
    if output:
        write_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)
    if report.verdict.status != "PASS":
        sys.stdout.flush()
        click.echo(report.verdict.summary(), err=True)
        raise click.exceptions.Exit(NOT_JUDGED if report.verdict.status == "NOT JUDGED" else 1)


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
    from envbuild.connect.nodes import parse_hosts, read_inventory
    from envbuild.connect.runners import LocalRunner, SshRunner
    from envbuild.record import read_run_info
    from envbuild.verify import exit_code, ran_on_controller, resolve_run, verify

    if sum(bool(x) for x in (hosts, inventory, local)) > 1:
        raise InputError("give only one of --hosts, --inventory, --local", hint="pick how to reach the nodes")
    run_dir = resolve_run(run, target)
    run_record = read_run_info(run_dir)  # a damaged run.json is bad input (exit 2), named
    if local or not (hosts or inventory) and ran_on_controller(run_dir):  # a run on this machine
        nodes = [LocalRunner(name="local")]
    else:
        how = dict(identity_file=identity, insecure=insecure, known_hosts=known_hosts or None)
        if inventory:
            specs = read_inventory(inventory, **how)
        else:
            spec = hosts or ",".join(run_record.hosts)
            if not spec:
                raise InputError("no nodes to verify", hint="pass --hosts, --inventory or --local")
            specs = parse_hosts(spec, **how)
        nodes = [LocalRunner(name=s.name) if s.is_local else SshRunner(s) for s in specs]
    results = verify(run_dir, nodes, deep=deep)
    if as_json:
        emit_json({"run": str(run_dir), "exit_code": exit_code(results), "nodes": [r.to_dict() for r in results]})
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
    code = exit_code(results)
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
