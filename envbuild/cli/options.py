"""Option pieces shared by several commands, so one flag means one thing everywhere.

- ``-i`` is ``--identity`` (an SSH private key, as ``ssh -i``) in every command that reaches
  nodes (facts, provision, verify); an Ansible inventory is always ``--inventory`` (no short
  form). ``identity_option`` refuses a file that is not a private key, so an old
  ``provision -i hosts.yml`` stops with a hint instead of trying the inventory as a key.
- ``-t`` is ``--target`` and RECIPE is a positional argument in every command taking them.
- Shell completion of RECIPE and ``--target``: the shipped names (``complete_recipe``,
  ``complete_target``), or file names once the word looks like a path.
- ``--valid-days`` is how long a statement signed with ``--sign-key`` holds, in every command
  that signs (``valid_days_option``).
"""

from __future__ import annotations

import os

import click
from click.shell_completion import CompletionItem

from envbuild.errors import InputError

KEY_MARK = b"PRIVATE KEY"  # every key ssh reads: -----BEGIN OPENSSH/RSA/EC PRIVATE KEY-----


def identity_option(ctx, param, value: str | None) -> str | None:  # noqa: ANN001 - click's callback
    """click callback for ``-i/--identity``: an existing file that holds an SSH private key."""
    if value is None:
        return None
    hint = ("-i/--identity takes an SSH private key in every envbuild command; "
            "pass an Ansible inventory with --inventory FILE")
    if not os.path.isfile(value):
        raise InputError(f"--identity {value}: no such file", hint=hint)
    try:
        with open(value, "rb") as fh:
            head = fh.read(200)
    except OSError as exc:
        raise InputError(f"--identity {value}: cannot read it ({exc.strerror})", hint=hint) from None
    if KEY_MARK not in head:
        raise InputError(f"--identity {value}: not an SSH private key (no '-----BEGIN ... PRIVATE KEY-----' line)",
                         hint=hint)
    return value


def _looks_like_path(word: str) -> bool:
    return word.startswith((".", "/", "~")) or os.sep in word or word.endswith((".yaml", ".yml"))


def _complete(names: list[str], incomplete: str) -> list[CompletionItem]:
    if _looks_like_path(incomplete):
        return [CompletionItem(incomplete, type="file")]
    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


def complete_recipe(ctx, param, incomplete: str) -> list[CompletionItem]:  # noqa: ANN001
    """Shipped recipe names starting with ``incomplete`` (file names for a path)."""
    from envbuild.flows.choices import recipe_names

    return _complete(recipe_names(), incomplete)


def complete_target(ctx, param, incomplete: str) -> list[CompletionItem]:  # noqa: ANN001
    """Shipped target profile names starting with ``incomplete`` (file names for a path)."""
    from envbuild.flows.choices import target_names

    return _complete(target_names(), incomplete)


def target_option(required: bool = True, help: str = "Target profile name or YAML path.", dest: str = "target"):  # noqa: A002
    """``-t/--target`` with completion of the shipped target names."""
    return click.option("--target", "-t", dest, required=required, help=help, shell_complete=complete_target)


def recipe_argument(required: bool = True):
    """The positional RECIPE (a shipped name or a YAML path), with completion."""
    return click.argument("recipe", required=required, shell_complete=complete_recipe)


def hosts_option(ctx, param, value: str | None) -> str | None:  # noqa: ANN001 - click's callback
    """click callback for ``--hosts``: given but empty (``--hosts ''``) is an InputError."""
    if value is not None and not value.replace(",", "").strip():
        raise InputError(f"--{param.name}: no host given (the value is empty)",
                         hint="e.g. --hosts root@10.0.0.1,10.0.0.2:2222; leave the option out for none")
    return value


def valid_days_option(f):  # noqa: ANN001, ANN201 - a click decorator
    """``--valid-days DAYS``: how long the statement ``--sign-key`` signs holds (a client refuses it after)."""
    from envbuild.flows.choices import DEFAULT_VALID_DAYS

    return click.option("--valid-days", "valid_days", type=click.FloatRange(min=0, max=36500, min_open=True),
                        default=None,
                        metavar="DAYS",
                        help=f"With --sign-key: the signed statement expires DAYS after it is made (default "
                             f"{DEFAULT_VALID_DAYS}); a client refuses an expired one (exit 1).")(f)


def valid_days(value: float | None, sign_key) -> float:  # noqa: ANN001
    """``--valid-days``'s days, refused without ``--sign-key``."""
    from envbuild.flows.choices import DEFAULT_VALID_DAYS

    if value is not None and not sign_key:
        raise InputError("--valid-days sets how long a signed statement holds: it goes with --sign-key",
                         hint="add --sign-key KEY, or drop --valid-days")
    return DEFAULT_VALID_DAYS if value is None else value
