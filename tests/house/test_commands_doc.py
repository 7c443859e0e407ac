"""docs/commands.md is the command line's own help (envbuild.cli.helpdoc): made again here and
compared, so that a changed option or help text fails until the file is regenerated
(``ENVBUILD_UPDATE_GOLDEN=1 python -m pytest tests/house/test_commands_doc.py``, then review the diff)."""

from __future__ import annotations

import os
import re

from click.testing import CliRunner

from envbuild import cli as cli_pkg
from envbuild.cli.helpdoc import WIDTH, commands_markdown
from support.paths import ROOT

DOC = ROOT / "docs" / "commands.md"


def test_commands_doc_is_the_cli_help() -> None:
    text = commands_markdown()
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        DOC.write_text(text)
    assert DOC.exists(), f"no {DOC}; create it with ENVBUILD_UPDATE_GOLDEN=1"
    assert text == DOC.read_text(), ("the commands' help changed: rerun with ENVBUILD_UPDATE_GOLDEN=1 "
                                     f"and review the diff of {DOC}")


def test_every_command_has_its_section_holding_what_its_help_prints() -> None:
    """The document is what ``envbuild COMMAND --help`` prints at the same width, one section
    per command of the table main() dispatches on."""
    text = DOC.read_text()
    headings = re.findall(r"^## envbuild (\S+)$", text, re.M)
    assert headings == list(cli_pkg.COMMANDS)
    cli_pkg._register([])
    for name in ("provision", "report", "launch"):
        said = CliRunner().invoke(cli_pkg.cli, [name, "--help"], prog_name="envbuild", terminal_width=WIDTH)
        assert said.exit_code == 0, said.output
        section = text.split(f"## envbuild {name}\n", 1)[1].split("\n## ", 1)[0]
        assert said.output.strip() in section, name


def test_the_readme_lists_every_command_once() -> None:
    """The README's command list has one row per command (the front door's index of
    docs/commands.md)."""
    readme = (DOC.parents[1] / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`envbuild ([a-z-]+)", table)
    assert sorted(named) == sorted(cli_pkg.COMMANDS), named
