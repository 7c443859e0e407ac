"""``envbuild port``: a published recipe moved to the GPUs at hand, as a variant recipe."""

from __future__ import annotations

import sys

import click

from envbuild.cli import cli
from envbuild.cli.options import recipe_argument, target_option
from envbuild.cli.output import console, emit_json


def _say(text: str) -> None:
    console.print(text, markup=False, highlight=False)


@cli.command("port")
@recipe_argument()
@target_option(required=False, dest="target_name",
               help="Target profile name or YAML path (the nodes to port to).")
@click.option("--facts", "facts_path", type=click.Path(dir_okay=False),
              help="Node facts JSON (envbuild facts --json): the node itself; without --target it is judged "
                   "as the local target.")
@click.option("-o", "--output", "out", default=None, type=click.Path(dir_okay=False),
              help="Variant recipe file to write (default: print the YAML).")
@click.option("--git-mirror", default=None, type=click.Path(file_okay=False),
              help="Folder of git mirrors (OWNER/NAME[.git] or OWNER+NAME/): the pinned trees are read there "
                   "for the known fixes; without it they are listed as undecided.")
@click.option("--json", "as_json", is_flag=True, help="Print what was ported as JSON (the YAML under 'text' "
              "when no -o).")
def port_cmd(recipe, target_name, facts_path, out, git_mirror, as_json):
    """Port RECIPE to the nodes of --target (or of --facts): draft a variant recipe.

    \b
    Decides, never asking: the torch / CUDA / Python (the node's own torch where it brings one,
    else the published build closest to the recipe's that runs on the node's GPU arch, driver
    and Pythons: envbuild/port/data/torch_builds.yaml), the Apex commit and options (envbuild's
    Apex rows over its known commits), the node's packages (what an image carried and the node
    lacks: a PyPI pin, unpinned for the lock, or left out: packages.yaml), a source whose commit
    its mirror lacks moved past where the setup stopped importing it, a scheduler launch run as
    the recipe's deepspeed/torchrun layout on the node, and the known fixes of
    envbuild/port/data/fixes.yaml (torch._six, numpy aliases, collections.abc, launch -> run,
    hard-coded -gencode, ...), each applied only where the source at its pinned commit has the
    pattern (git grep / git show in --git-mirror). Every change is a deviation with its source;
    what it cannot decide (a source it could not read, GPU counts, a scheduler launch with no
    such layout) is listed under undecided:, which `envbuild check` refuses until settled.
    Nothing is installed or locked: the next steps are printed.
    Example:  envbuild port alpa-megatron --target h100-venv --git-mirror /srv/mirrors \\
                  -o alpa-megatron-sm90.yaml
    Exit 0 drafted; 1 no torch build or Apex commit of the tables fits; 2 bad input.
    """
    from envbuild.flows.port import PortRequest, port

    res = port(PortRequest(recipe=recipe, target=target_name, facts=facts_path, out=out, git_mirror=git_mirror))
    if as_json:
        emit_json(res.to_dict())
        return 0
    if res.out is None:
        sys.stdout.write(res.text)
        return 0
    _say(f"wrote {res.out}: {res.name} (variant_of {res.variant_of}) for {res.target}: {res.stack}"
         + (f", Apex {res.apex[:12]}" if res.apex else ""))
    _say(f"  {len(res.fixes)} fix patch(es), {len(res.deviations)} deviation(s), {len(res.undecided)} undecided")
    for f in res.fixes:
        _say(f"  fix {f['fix']}: {f['component']}:{f['file']}:{f['line']} ({f['count']})")
    for component, why in res.unread.items():
        _say(f"  not read: {component}: {why}")
    for u in res.undecided:
        _say(f"  undecided {u['field']}: {u['why']}")
    for n in res.notes:
        _say(f"  note: {n}")
    _say("next:")
    for step in res.next_steps:
        _say(f"  {step}")
    return 0
