"""The thin command line: each command parses options, calls the library, prints.

Commands live one per module in this package (``envbuild/cli/<command>.py``) and register
themselves on ``cli``. Errors derived from ``EnvbuildError`` print as ``error:``/``hint:``
lines with the error's exit code; a traceback only with ``--debug``.
"""

from __future__ import annotations

import errno
import importlib
import sys

import click

from envbuild import __version__
from envbuild.errors import EnvbuildError

#: each command's module (``envbuild/cli/<module>.py`` registers it on ``cli``); a run imports
#: only the module of the command it runs (importing all of them took a second of every
#: command's start), --help and completion import them all. tests/cli/test_cli_interfaces.py
#: keeps this table equal to what the modules register.
COMMANDS = {
    "recipes": "recipes_cmd", "show": "recipes_cmd",
    "facts": "facts_cmd",
    "check": "check_cmd",
    "lock": "lock_cmd",
    "plan": "plan_cmd",
    "apex-patch": "apex_cmd",
    "provision": "provision_cmd",
    "smoke": "smoke_cmd",
    "report": "report_cmd", "verify": "report_cmd", "diff": "report_cmd", "attest": "report_cmd",
    "launch": "launch_cmd",
    "render": "render_cmd",
    "bundle": "bundle_cmd", "pack": "bundle_cmd",
    "parse": "parse_cmd",
    "imports": "imports_cmd",
    "image-provenance": "image_cmd",
    "draft": "draft_cmd",
    "port": "port_cmd",
}
COMMAND_MODULES = list(dict.fromkeys(COMMANDS.values()))  # in the order help lists them


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="envbuild")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Rebuild published large-model training baselines on your GPU nodes, exactly.

    \b
    recipe + target (+ node facts) -> check -> lock -> plan -> provision -> smoke -> report
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register(args: list[str] | None = None) -> None:
    """Import the command modules: only the one of the command ``args`` name (its first word
    that is not an option), else all of them; all of them too when ``--help`` comes before the
    command (click shows the group's help, which lists every command). A module that cannot be
    imported is a bug: it fails loudly."""
    args = args or []
    first = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
    helped = any(a in ("-h", "--help") for a in args[:first])
    wanted = [COMMANDS[args[first]]] if first < len(args) and args[first] in COMMANDS and not helped \
        else COMMAND_MODULES
    for name in wanted:
        importlib.import_module(f"envbuild.cli.{name}")


FULL_OR_READ_ONLY = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def main(argv: list[str] | None = None) -> int:
    from envbuild.display import visible
    from envbuild.interrupt import Interrupted, raise_on_sigterm, signal_name

    args = list(sys.argv[1:] if argv is None else argv)
    _register(args)
    debug = "--debug" in args
    from envbuild.cli.logs import hold_library_logs

    hold_library_logs(debug)  # no library's log line or traceback on stderr without --debug
    raise_on_sigterm()  # SIGTERM ends a command like Ctrl-C does (recorded, exit 143), never silently
    try:
        rc = cli.main(args=args, prog_name="envbuild", standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except EnvbuildError as exc:
        if debug:
            raise
        click.echo(visible(f"error: {exc}"), err=True)
        if exc.hint:
            click.echo(visible(f"hint: {exc.hint}"), err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return 2 if exc.exit_code == 2 else exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("interrupted (SIGINT)", err=True)
        return 130
    except Interrupted as exc:
        click.echo(f"interrupted ({signal_name(exc.signum)})", err=True)
        return exc.exit_code
    except OSError as exc:
        if debug:
            raise
        if exc.errno in FULL_OR_READ_ONLY:  # the machine's problem, not envbuild's: exit 3
            where = f" ({exc.filename})" if exc.filename else ""
            click.echo(visible(f"error: {exc.strerror}{where}"), err=True)
            click.echo("hint: free space there (or make it writable), or point ENVBUILD_HOME, --prefix or -o "
                       "elsewhere; files are written whole or not at all", err=True)
            return 3
        click.echo(visible(f"error: internal error: {type(exc).__name__}: {exc}"), err=True)
        click.echo("hint: rerun with --debug for the traceback and report it", err=True)
        return 70
    except Exception as exc:  # noqa: BLE001 - last line of defence for users
        if debug:
            raise
        click.echo(visible(f"error: internal error: {type(exc).__name__}: {exc}"), err=True)
        click.echo("hint: rerun with --debug for the traceback and report it", err=True)
        return 70
