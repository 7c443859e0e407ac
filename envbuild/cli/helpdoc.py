"""docs/commands.md, made from the command line's own help, so that the reference cannot drift.

Every command's ``--help`` as click renders it (100 columns, whatever the terminal), in the
order of ``envbuild.cli.COMMANDS``, under one heading each. tests/house/test_commands_doc.py makes it
again and fails on a difference; ``ENVBUILD_UPDATE_GOLDEN=1`` there, or this module run as a
script, writes it::

    python -m envbuild.cli.helpdoc -o docs/commands.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import click

WIDTH = 100
HEADER = """# Commands

Every command's `--help`, as `envbuild COMMAND --help` prints it. This file is generated from
the command line itself (`python -m envbuild.cli.helpdoc -o docs/commands.md`;
`tests/house/test_commands_doc.py` fails when it differs): edit the commands' help, not this file.
Exit codes are in the [README](../README.md#exit-codes); the flags every command shares in
[interfaces.md](interfaces.md).
"""


def _context(command: click.Command, name: str, parent: click.Context | None = None) -> click.Context:
    """The context click makes for ``command`` (its own settings: ``-h`` beside ``--help``), at
    ``WIDTH`` columns whatever the terminal (``COLUMNS``) says."""
    settings = {**command.context_settings, "max_content_width": WIDTH, "terminal_width": WIDTH}
    return click.Context(command, info_name=name, parent=parent, **settings)


def commands_markdown() -> str:
    """The Markdown of docs/commands.md: the group's help, then each command's."""
    from envbuild import cli as pkg

    pkg._register([])  # every command's module
    root = _context(pkg.cli, "envbuild")
    parts = [HEADER, "## envbuild", "", "```text", pkg.cli.get_help(root), "```", ""]
    for name in pkg.COMMANDS:
        command = pkg.cli.get_command(root, name)
        assert command is not None, name  # COMMANDS names only registered commands (tests/cli/test_cli_interfaces.py)
        parts += [f"## envbuild {name}", "", "```text", command.get_help(_context(command, name, root)), "```", ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write docs/commands.md from the CLI's help.")
    parser.add_argument("-o", "--output", type=Path, help="the file to write (default: stdout)")
    args = parser.parse_args(argv)
    text = commands_markdown()
    if args.output:
        args.output.write_text(text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
