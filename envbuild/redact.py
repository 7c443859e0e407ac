"""Secrets never reach a run directory, a log or a report.

Two tools, used wherever envbuild writes environment-like data:

- ``is_secret_name(name)``: an environment variable whose name looks like a credential
  (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``GITHUB_PAT`` ...).
- ``Redactor``: replaces the *values* of the controller's secret-named variables, and the
  password part of URLs, in any text or JSON-like object before it is written.

>>> is_secret_name("HF_TOKEN"), is_secret_name("PATH"), is_secret_name("SSH_AUTH_SOCK")
(True, False, False)
>>> Redactor({"HF_TOKEN": "sekrit-xyz"}).text("pull with sekrit-xyz from https://u:pw@h/x")
'pull with *** from https://u:***@h/x'
>>> Redactor({}).text("git clone https://ghp_abc123@github.com/o/r.git; curl 'https://h/f?sig=abc&x=1'")
"git clone https://***@github.com/o/r.git; curl 'https://h/f?sig=***&x=1'"
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "AUTH",
                "KEY", "PRIVATE", "COOKIE", "SESSION_ID")
SECRET_PARTS = {"PAT", "PASS", "PWD_HASH", "SIG", "SIGNATURE"}  # whole ``_``-separated words only
NOT_SECRET = {"SSH_AUTH_SOCK", "KEYTIMEOUT", "XDG_SESSION_ID", "GPG_KEY_ID"}  # paths and ids
MIN_SECRET_LEN = 4  # shorter values ("1", "yes") would mask ordinary text
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]+:)(?P<pw>[^/\s@]+)(?=@)")
# a token as the URL's user (https://TOKEN@host/...): the whole user part
_URL_TOKEN_USER = re.compile(r"(?P<head>(?<![A-Za-z0-9+.\-])(?:git\+)?(?:https?|ftp)://)(?P<user>[^/\s:@]+)(?=@)",
                             re.IGNORECASE)  # an ssh:// user (git@host) is a login name, kept
# a credential in the query (?token=..., &X-Amz-Signature=..., &access_key=...)
_URL_QUERY_PARAM = re.compile(r"(?P<head>[?&](?P<name>[A-Za-z0-9_.\-]+)=)(?P<v>[^&\s#'\"]+)")
_SECRET_PARAM = re.compile(r"(?:^|[_.\-])(?:token|secret|sig|signature|password|passwd|pass|key|apikey|auth|"
                           r"credential|credentials)(?:$|[_.\-])", re.IGNORECASE)


def _secret_param(m: re.Match) -> str:
    return m["head"] + MASK if _SECRET_PARAM.search(m["name"]) else m[0]


def url_credentials(url: str) -> str | None:
    """What of ``url`` is a credential ("a user name or password", "a token in the query"), None
    when there is none: a URL a recipe or target names is stored in locks, bundles, run folders
    and command lines, so credentials come from netrc, a keyring or the environment instead."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if "@" in parts.netloc and parts.scheme.lower() in ("http", "https", "ftp", "git+https", "git+http"):
        return "a user name or password"  # an ssh:// user (git@host) is a login name, not a secret
    if any(_SECRET_PARAM.search(k) for k, _ in parse_qsl(parts.query, keep_blank_values=True)):
        return "a token in the query"
    return None


def is_secret_name(name: str) -> bool:
    """True for variable names that look like they hold a credential."""
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    return any(w in upper for w in SECRET_WORDS) or bool(SECRET_PARTS & set(upper.split("_")))


def mask_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``env`` with the value of every secret-named variable replaced by ``***``."""
    return {k: (MASK if is_secret_name(str(k)) and v not in (None, "") else v) for k, v in env.items()}


class Redactor:
    """Masks known secret values and URL passwords in text and in nested JSON-like data."""

    def __init__(self, environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        values = {v for k, v in env.items() if is_secret_name(k) and v and len(v) >= MIN_SECRET_LEN}
        self.values = sorted(values, key=len, reverse=True)  # longest first: no partial leftovers

    def add(self, values) -> Redactor:
        """Also mask these values (e.g. an inventory's ``ansible_become_password``)."""
        more = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LEN}
        self.values = sorted(set(self.values) | more, key=len, reverse=True)
        return self

    def text(self, s: str) -> str:
        for v in self.values:
            if v in s:
                s = s.replace(v, MASK)
        if "://" not in s:
            return s
        s = _URL_PASSWORD.sub(lambda m: m["head"] + MASK, s)
        s = _URL_TOKEN_USER.sub(lambda m: m["head"] + (m["user"] if m["user"] == MASK else MASK), s)
        return _URL_QUERY_PARAM.sub(_secret_param, s)

    def obj(self, obj: Any) -> Any:
        """``obj`` with every string redacted; mappings that look like environments masked by name."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {k: (MASK if _env_key(k) and isinstance(v, str) and v else self.obj(v)) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.obj(x) for x in obj]
        return obj

    def argv(self, argv: list[str]) -> list[str]:
        """A command line with ``NAME=value`` secrets and ``--token/--password X`` values masked."""
        out: list[str] = []
        hide_next = False
        for arg in argv:
            if hide_next:
                out.append(MASK)
                hide_next = False
                continue
            name, eq, _value = arg.partition("=")
            flag = name.lstrip("-")
            if eq and is_secret_name(flag.replace("-", "_")):
                out.append(f"{name}={MASK}")
            elif arg.startswith("--") and not eq and is_secret_name(flag.replace("-", "_")):
                out.append(arg)
                hide_next = True
            else:
                out.append(self.text(arg))
        return out


def secret_key(key: Any) -> bool:
    """A mapping key whose value is a credential (``ansible_password``, ``ansible_become_pass``),
    not the place of one (``ansible_ssh_private_key_file``)."""
    return (isinstance(key, str) and is_secret_name(key.upper())
            and not key.upper().endswith(("_FILE", "_PATH", "_DIR", "_SOCK")))  # where, not what


def secret_values(mapping: Any) -> set[str]:
    """Every string value, at any depth, stored under a secret-looking key (``ansible_password``,
    ``ansible_become_pass``...): what to mask once an inventory has been written."""
    found: set[str] = set()
    if isinstance(mapping, Mapping):
        for k, v in mapping.items():
            if isinstance(v, str) and secret_key(k):
                found.add(v)
            else:
                found |= secret_values(v)
    elif isinstance(mapping, (list, tuple)):
        for x in mapping:
            found |= secret_values(x)
    return found


def _env_key(key: Any) -> bool:
    """An environment variable name (UPPER_CASE) that looks secret; lower-case JSON keys such as
    ``tokens_per_s`` are data, not credentials."""
    return isinstance(key, str) and key.isupper() and is_secret_name(key)
