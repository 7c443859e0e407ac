"""The thin command line: each command parses options, calls the library, prints.

Commands live one per module in this package (``envbuild/cli/<command>.py``) and register
themselves on ``cli``. Errors derived from ``EnvbuildError`` print as ``error:``/``hint:``
lines with the error's exit code; a traceback only with ``--debug``.
"""

from __future__ import annotations

import importlib
import sys

import click

from envbuild import __version__
from envbuild.errors import EnvbuildError

COMMAND_MODULES = [
    "recipes_cmd",  # envbuild recipes, envbuild show
    "facts_cmd",  # envbuild facts
    "check_cmd",  # envbuild check
    "lock_cmd",  # envbuild lock
    "plan_cmd",  # envbuild plan
    "apex_cmd",  # envbuild apex-patch
    "provision_cmd",  # envbuild provision
    "smoke_cmd",  # envbuild smoke
    "report_cmd",  # envbuild report, verify, diff
    "launch_cmd",  # envbuild launch
    "render_cmd",  # envbuild render
    "bundle_cmd",  # envbuild bundle
    "parse_cmd",  # envbuild parse
    "imports_cmd",  # envbuild imports
]


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


def _register() -> None:
    for name in COMMAND_MODULES:  # a command module that cannot be imported is a bug: fail loudly
        importlib.import_module(f"envbuild.cli.{name}")


def main(argv: list[str] | None = None) -> int:
    from envbuild.interrupt import Interrupted, raise_on_sigterm, signal_name

    _register()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    raise_on_sigterm()  # SIGTERM ends a command like Ctrl-C does (recorded, exit 143), never silently
    try:
        rc = cli.main(args=args, prog_name="envbuild", standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except EnvbuildError as exc:
        if debug:
            raise
        click.echo(f"error: {exc}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
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
    except Exception as exc:  # noqa: BLE001 - last line of defence for users
        if debug:
            raise
        click.echo(f"error: internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo("hint: rerun with --debug for the traceback and report it", err=True)
        return 70
