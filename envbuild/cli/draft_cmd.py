"""``envbuild draft``: a recipe skeleton from a published repository, read statically."""

from __future__ import annotations

import sys

import click

from envbuild.cli import cli
from envbuild.cli.output import console, emit_json


@cli.command("draft")
@click.argument("source")
@click.option("--ref", required=True, help="Branch, tag or commit to read (resolved to a commit, cited everywhere).")
@click.option("-o", "--output", "out", default=None, type=click.Path(dir_okay=False),
              help="Recipe file to write (default: print the YAML).")
@click.option("--git-mirror", default=None, type=click.Path(file_okay=False),
              help="Folder of git mirrors (OWNER/NAME[.git] or OWNER+NAME/): a URL SOURCE and the pinned VCS "
                   "dependencies are read there.")
@click.option("--name", default=None, help="The recipe's name (default: the repository's name, lower-cased).")
@click.option("--json", "as_json", is_flag=True, help="Print what was drafted as JSON (the YAML under 'text' "
              "when no -o).")
def draft_cmd(source, ref, out, git_mirror, name, as_json):
    """Draft a recipe from SOURCE (a git URL, or a local repository's path) at REF.

    \b
    Reads, at the resolved commit and with git only (never a checkout, never the repository's
    code): requirements*.txt (following -r), setup.py (ast, literal lists), setup.cfg,
    pyproject.toml, environment.yml, Dockerfiles (FROM, ARG, pip and apt lines), the README's
    fenced shell blocks, .gitmodules, and pinned git+URL@COMMIT dependencies (followed into
    their own requirements where --git-mirror has them). Every pin, source and command cites
    FILE:LINE; what could not be decided is listed under undecided:, which `envbuild check`
    refuses until each entry is filled and deleted.
    Example:  envbuild draft https://github.com/EleutherAI/gpt-neox --ref v1.0 \\
                  --git-mirror /srv/mirrors -o gpt-neox.yaml
    Exit 0 drafted; 2 bad input (not a repository, unknown ref, a URL without --git-mirror);
    3 the URL's mirror is missing.
    """
    from envbuild.flows.draft import DraftRequest, draft

    res = draft(DraftRequest(source=source, ref=ref, out=out, git_mirror=git_mirror, name=name))
    if as_json:
        emit_json(res.to_dict())
        return 0
    if res.out is None:
        sys.stdout.write(res.text)
        return 0
    console.print(f"wrote {res.out}: recipe {res.name} from {res.url} at {res.ref} ({res.commit[:12]}), "
                  f"{res.packages} package(s), {res.sources} source(s), {len(res.undecided)} undecided",
                  markup=False, highlight=False)
    for u in res.undecided:
        console.print(f"  undecided {u['field']}: {u['why']}", markup=False, highlight=False)
    return 0
