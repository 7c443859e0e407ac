"""Can the node reach the package indexes its plan installs from? A command and a pure parser.

A pip step with ``--index-url https://download.pytorch.org/whl/cpu`` on a node that cannot
reach that host ends, minutes later, in pip's retry output. The plan names every such URL
(``envbuild.plan.indexes.remote_indexes``); before anything is installed the node fetches each once, with its own
Python and its own proxy settings (``probe_command``), and ``unreachable`` reads the answer. A
step that installs from a wheelhouse or bundle alone (``--no-index``) names no URL, so
``--wheelhouse`` with the wheels in it skips the check. PyPI itself, the implicit default, is
not probed: the hint is about the indexes a recipe adds.

An unreachable index is not a refusal when the node's own pip configuration already serves
every wheel the plan takes from it: pip reads ``find-links`` from its config files and
``PIP_FIND_LINKS`` and falls back to those folders (after its retries), as on an image whose
pip.conf points at a local wheel folder. The probe looks in those folders for a wheel of each
``name-version`` the plan installs from that URL and answers ``local`` with the folder.

    >>> parse("ok\\thttps://a/simple\\nfail\\thttps://b/cpu\\t<urlopen error timed out>\\n")
    {'https://a/simple': None, 'https://b/cpu': '<urlopen error timed out>'}
"""

from __future__ import annotations

import shlex

TIMEOUT_S = 10  # per URL: a reachable index answers in well under a second

# Runs with the node's python3; prints one line per URL: "ok\tURL" or "fail\tURL\tREASON".
# Each argument is "URL" or "URL\x1fname-version\x1f..." (the wheels the plan takes from URL).
_CODE = """\
import configparser, os, sys, urllib.request
def links():
    dirs = os.environ.get("PIP_FIND_LINKS", "").split()
    cfg = os.environ.get("PIP_CONFIG_FILE", "")
    files = [] if cfg == os.devnull else [  # pip reads no config file at all then
        "/etc/pip.conf", "/etc/xdg/pip/pip.conf", os.path.expanduser("~/.pip/pip.conf"),
        os.path.expanduser("~/.config/pip/pip.conf"), cfg]
    for f in files:
        c = configparser.ConfigParser(interpolation=None)
        try:
            c.read(f)
        except Exception:
            continue
        for sec in ("global", "install"):
            dirs += c.get(sec, "find-links", fallback="").split()
    return [d[7:] if d.startswith("file://") else d for d in dirs if not d.startswith(("http:", "https:"))]
def served(wants):
    for d in links():
        try:
            names = [n.lower() for n in os.listdir(d)]
        except OSError:
            continue
        if all(any(n.startswith(w + "-") or n.startswith(w + "+") for n in names) for w in wants):
            return d
for arg in sys.argv[1:]:
    url, *wants = arg.split("\\x1f")
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=%d).close()
        print("ok", url, sep="\\t")
    except urllib.error.HTTPError as exc:
        print("ok" if exc.code < 500 else "fail", url, "HTTP %%d" %% exc.code, sep="\\t")
    except Exception as exc:
        where = served(wants) if wants else None
        if where:
            print("local", url, where, sep="\\t")
        else:
            print("fail", url, str(exc).replace("\\t", " ").replace("\\n", " ")[:200] or type(exc).__name__, sep="\\t")
""" % TIMEOUT_S




def probe_command(urls: list[str], python: str = "python3", wants: dict[str, list[str]] | None = None) -> str:
    """The shell command that fetches each URL once on the node (pure); ``wants[url]``: the
    wheels whose presence in the node's pip find-links folders serves that URL locally."""
    args = ["\x1f".join([u, *(wants or {}).get(u, [])]) for u in urls]
    return shlex.join([python, "-c", _CODE, *args])


def parse(output: str) -> dict[str, str | None]:
    """{url: None when it answered or the node's find-links serve it, else why not} from
    ``probe_command``'s output (pure)."""
    out: dict[str, str | None] = {}
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0] in ("ok", "fail", "local"):
            out[parts[1]] = None if parts[0] in ("ok", "local") else ("\t".join(parts[2:]) or "no answer")
    return out


def local_dirs(output: str) -> dict[str, str]:
    """{url: the find-links folder that serves it} for each ``local`` answer (pure)."""
    out: dict[str, str] = {}
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] == "local":
            out[parts[1]] = parts[2]
    return out


def unreachable(urls: list[str], rc: int, stdout: str, stderr: str) -> dict[str, str]:
    """{url: reason} for every URL the node could not reach; a URL the probe never answered for
    (python3 missing, the probe killed) counts as unreachable with the probe's own error."""
    answers = parse(stdout)
    fallback = (stderr.strip().splitlines() or [f"the probe exited {rc}"])[-1][:200]
    return {u: why for u in urls if (why := answers.get(u, fallback)) is not None}
