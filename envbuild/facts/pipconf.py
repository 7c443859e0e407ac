"""pip's configuration files on a node, and the environment variables that stand for them.

uv reads none of pip's configuration files; it takes pip's settings from the environment
(``envbuild.actions.steps.UV_ENV_FROM_PIP``). So a node whose pip finds its certificate
bundle, index, trusted hosts or proxy only in a pip.conf installs with pip and fails with uv.
The probe reports which files exist and which ``section.key`` names they set, never the
values (an index URL may carry a password), and which of the standing-in variables are set.

    >>> parse_pip_config("ENV PIP_CERT\\nFILE /etc/pip.conf\\nKEY global.cert\\nKEY global.index-url\\n")
    ({'/etc/pip.conf': ['global.cert', 'global.index-url']}, ['PIP_CERT'])
"""

from __future__ import annotations

from envbuild.facts.probe import Probe

# the settings that decide where and how packages are fetched, with the variables uv (or the
# TLS stack it shares with pip) reads instead; a key set in a file with none of them set is
# one uv does not see
FETCH_SETTINGS: dict[str, tuple[str, ...]] = {
    "cert": ("PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"),
    "client-cert": ("PIP_CLIENT_CERT",),
    "index-url": ("PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX"),
    "trusted-host": ("PIP_TRUSTED_HOST", "UV_INSECURE_HOST"),
    "proxy": ("PIP_PROXY", "https_proxy", "HTTPS_PROXY"),
}
SECTIONS = ("global", "install")
_VARS = sorted({v for names in FETCH_SETTINGS.values() for v in names})

PROBES = [Probe("pip_config", "\n".join([
    f'for v in {" ".join(_VARS)}; do eval "[ -n \\"\\${{$v:-}}\\" ]" && echo "ENV $v"; done',
    'for f in "${PIP_CONFIG_FILE:-}" /etc/pip.conf /etc/xdg/pip/pip.conf "$HOME/.config/pip/pip.conf" '
    '"$HOME/.pip/pip.conf"; do',
    '  [ -n "$f" ] && [ -f "$f" ] || continue',
    '  echo "FILE $f"',
    "  awk '/^[ \\t]*\\[/{s=$0; gsub(/[][ \\t]/,\"\",s); next} "
    "/^[ \\t]*[A-Za-z0-9_-]+[ \\t]*[=:]/{k=$0; sub(/[=:].*/,\"\",k); gsub(/[ \\t]/,\"\",k); print \"KEY \" s \".\" k}' \"$f\"",
    "done",
    "exit 0"]))]


def parse_pip_config(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """({file: [section.key, ...]}, [variables set]) from the probe's output."""
    files: dict[str, list[str]] = {}
    env: list[str] = []
    current = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        rest = rest.strip()
        if kind == "ENV" and rest:
            env.append(rest)
        elif kind == "FILE" and rest:
            current = rest
            files.setdefault(current, [])
        elif kind == "KEY" and rest and current is not None and rest not in files[current]:
            files[current].append(rest.lower())
    return files, sorted(set(env))


def unseen_by_uv(files: dict[str, list[str]], env: list[str]) -> list[str]:
    """``"<file>: <section.key>"`` for each fetch setting pip reads from a file and uv would not
    see (no standing-in variable set).

    >>> unseen_by_uv({"/etc/pip.conf": ["global.cert", "global.index-url", "global.timeout"]}, ["PIP_CERT"])
    ['/etc/pip.conf: global.index-url']
    """
    out = []
    for file, keys in files.items():
        for key in keys:
            section, _, name = key.partition(".")
            if section in SECTIONS and name in FETCH_SETTINGS and not set(FETCH_SETTINGS[name]) & set(env):
                out.append(f"{file}: {key}")
    return out
