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
from envbuild.display import visible
from envbuild.errors import CheckFailed, EnvironmentProblem


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
                   "`envbuild attest OUTPUT --trusted-key KEY.pub` checks it. Without it, a signature an earlier "
                   "report left as OUTPUT.intoto.jsonl is removed.")
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
    from envbuild.flows.report import ReportRequest, report

    days = _valid_days(valid_days, sign_key)
    outcome = report(ReportRequest(run_dir=run_dir, fmt=fmt, output=output, as_recipe=as_recipe, appendix=appendix,
                                   templates_dir=templates_dir, sign_key=sign_key, valid_days=days))
    if outcome.output:
        click.echo(f"wrote {outcome.output}", err=True)
        if outcome.provenance:
            click.echo(f"wrote {outcome.provenance}", err=True)
        if outcome.removed:
            click.echo(f"removed {outcome.removed}: the provenance of the report this one replaced", err=True)
    else:
        sys.stdout.write(outcome.text)
    if outcome.summary:
        sys.stdout.flush()
        click.echo(outcome.summary, err=True)
    if outcome.exit_code:
        raise click.exceptions.Exit(outcome.exit_code)


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

    from envbuild.flows.attest import AttestRequest, attest

    outcome = attest(AttestRequest(artifact=artifact, trusted_keys=tuple(trusted_keys), provenance=provenance,
                                   kind=kind))
    if as_json:
        click.echo(json.dumps(outcome.statement, indent=2, sort_keys=True))
        return
    # the statement's values are the signer's text: shown with control bytes escaped
    subject = outcome.subject
    click.echo(visible(f"{artifact.name}: signed by a trusted key; subject {subject['name']} (the file's name), "
                       f"sha256 {subject['digest']['sha256']}, made {outcome.finished}, "
                       f"expires {outcome.expires}"))
    click.echo(visible("made from: " + ", ".join(f"{k} {v}" for k, v in outcome.parameters.items())))
    click.echo(visible(f"inputs: {outcome.inputs} file(s) by sha256; builder {outcome.builder}"))


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
    from envbuild.flows.nodes import NodesRequest
    from envbuild.flows.verify import VerifyRequest, verify_run

    reach = NodesRequest(hosts=hosts, inventory=inventory, local=local, identity_file=identity,
                         known_hosts=tuple(known_hosts), insecure=insecure)
    outcome = verify_run(VerifyRequest(run=run, target=target, deep=deep, reach=reach))
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
    from envbuild.flows.diff import DiffRequest, diff

    outcome = diff(DiffRequest(report_a, report_b))
    diffs, differ = outcome.differences, outcome.environments_differ
    if as_json:
        emit_json(outcome.to_dict())
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
