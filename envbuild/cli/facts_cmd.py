"""``envbuild facts``: gather node facts locally or over SSH and print or save them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from envbuild.cli.tables import FoldingTable as Table

from envbuild.cli import cli
from envbuild.cli.options import hosts_option, identity_option
from envbuild.cli.output import SafeConsole, console, data, write_json_text

if TYPE_CHECKING:
    from envbuild.flows.facts import FactsOutcome


@cli.command("facts")
@click.option("--local", "local", is_flag=True, help="This machine (the default).")
@click.option("--hosts", metavar="[USER@]H1[:PORT],H2", callback=hosts_option,
              help="SSH hosts; a user applies to the hosts after it.")
@click.option("--inventory", type=click.Path(dir_okay=False), help="Ansible inventory (INI or YAML).")
@click.option("--identity", "-i", type=click.Path(dir_okay=False), callback=identity_option,
              help="SSH private key (as ssh -i).")
@click.option("--port", type=click.IntRange(1, 65535), default=22, show_default=True, help="Default SSH port.")
@click.option("--user", help="Default SSH user.")
@click.option("--known-hosts", "known_hosts", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="known_hosts file to check host keys against (repeatable; default: $ENVBUILD_KNOWN_HOSTS, "
                   "else ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts, as ssh).")
@click.option("--insecure", is_flag=True, help="Do not check SSH host keys (throwaway test nodes only; warns).")
@click.option("--python", "python", metavar="PATH", help="Interpreter whose packages and torch NCCL to record.")
@click.option("--connect-timeout", type=click.IntRange(1, 300), default=10, show_default=True, help="Seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one object for one host, a list for several).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the facts JSON to this file.")
def facts_command(local, hosts, inventory, identity, port, user, known_hosts, insecure, python, connect_timeout,
                  as_json, output):
    """Gather what is really on the nodes: GPUs, driver, CUDA, OS, glibc, Pythons, NCCL, IB, engines.

    One shell command per node (one SSH round trip), hosts in parallel. A missing tool is
    recorded under "missing", never an error. Host keys are checked as ssh and Ansible check
    them: an unknown or changed key stops that host (exit 3) unless --insecure. -o writes ONE file: a JSON object when a single
    host was asked for (--local or one --hosts entry), a JSON list otherwise, also when some
    hosts were unreachable (their entries are left out and the exit code is 3).

    \b
    envbuild facts                                  # this machine
    envbuild facts --hosts root@10.0.0.1,10.0.0.2:2222 -i ~/.ssh/id_ed25519 --json
    envbuild facts --inventory hosts.ini -o facts.json
    """
    from envbuild.flows.facts import FactsRequest, facts
    from envbuild.flows.nodes import NodesRequest

    reach = NodesRequest(local=local, hosts=hosts, inventory=inventory, identity_file=identity, port=port, user=user,
                         known_hosts=tuple(known_hosts), insecure=insecure)
    res = facts(FactsRequest(reach=reach, python=python, connect_timeout=connect_timeout, output=output))
    if res.text is not None:
        if as_json:
            write_json_text(res.text)
        else:
            _print_table(res)
            if output:
                console.print(f"wrote {output}")
    elif as_json and res.as_list:
        click.echo("[]")

    for exc in res.errors[:-1] if len(res.errors) > 1 else []:
        click.echo(f"error: {exc}", err=True)
    failure = res.failure()
    if failure is not None:
        raise failure


def _print_table(res: FactsOutcome) -> None:
    table = Table(show_lines=False, header_style="bold")
    for i, name in enumerate(res.columns):
        table.add_column(name, no_wrap=i < 2, overflow="fold")
    for row in res.rows:
        table.add_row(*row)
    # a pipe or a log file gets the whole table instead of an 80-column squeeze
    out = console if console.is_terminal else SafeConsole(highlight=False, width=max(console.width, 240))
    out.print(table)
    if len(res.facts) == 1 and res.facts[0].missing:
        for key, why in res.facts[0].missing.items():
            console.print(data(f"  not found: {key}: {why}", style="dim"))
