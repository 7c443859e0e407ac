"""What counts as a name: recipe and target names (they become paths), environment variables.

A recipe or target name becomes a folder or file name (``lockfiles/<recipe>/<target>.lock``,
run directories), so it is one lower-case path component, never ``..`` or ``a/b``. An
environment variable name reaches a shell (``export NAME=...``), so it is a POSIX name.

>>> bool(NAME_RE.match("opt-175b-azure")), bool(NAME_RE.match("../etc"))
(True, False)
>>> bool(ENV_NAME_RE.match("NCCL_IB_HCA")), bool(ENV_NAME_RE.match("X=1; touch pwned; Y"))
(True, False)
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NAME_RULE = "lower-case letters, digits, '.', '_' and '-', starting with a letter or digit"
ENV_NAME_RULE = "letters, digits and '_', not starting with a digit"


def project_name(name: str) -> str:
    """A distribution's PEP 503 normalized name, the one normaliser of the controller side (the
    node-side files, standard library only, keep their own copy): ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_name(value: object) -> bool:
    return isinstance(value, str) and bool(NAME_RE.fullmatch(value))


def check_name(value: str, what: str = "name") -> str:
    """``value`` when it is a valid recipe/target name, else ValueError (for pydantic validators)."""
    if not is_name(value):
        raise ValueError(f"{value!r} is not a valid {what} ({NAME_RULE})")
    return value


def check_env_name(value: str) -> str:
    if not ENV_NAME_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not an environment variable name ({ENV_NAME_RULE})")
    return value


def check_env_value(value: str) -> str:
    """An environment variable's value on one line: no newline or other control character (a
    value is written into env files, Dockerfiles, Apptainer definitions and job scripts; a line
    break there would start a new instruction or section)."""
    if any(ord(c) < 32 and c != "\t" or 127 <= ord(c) < 160 for c in value):
        raise ValueError(f"{value[:60]!r}: an environment value must be one line without control characters")
    return value


# Field types for the schemas: an invalid key or item is reported at its own line.
Name = Annotated[str, AfterValidator(check_name)]
EnvName = Annotated[str, AfterValidator(check_env_name)]
EnvValue = Annotated[str, AfterValidator(check_env_value)]
