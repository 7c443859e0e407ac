"""Can the node reach the package indexes its plan installs from? A command and a pure parser.

A pip step with ``--index-url https://download.pytorch.org/whl/cpu`` on a node that cannot
reach that host ends, minutes later, in pip's retry output. The plan names every such URL
(``remote_indexes``); before anything is installed the node fetches each once, with its own
Python and its own proxy settings (``probe_command``), and ``unreachable`` reads the answer. A
step that installs from a wheelhouse or bundle alone (``--no-index``) names no URL, so
``--wheelhouse`` with the wheels in it skips the check. PyPI itself, the implicit default, is
not probed: the hint is about the indexes a recipe adds.

    >>> parse("ok\\thttps://a/simple\\nfail\\thttps://b/cpu\\t<urlopen error timed out>\\n")
    {'https://a/simple': None, 'https://b/cpu': '<urlopen error timed out>'}
"""

from __future__ import annotations

import shlex

from envbuild.plan.model import Plan

TIMEOUT_S = 10  # per URL: a reachable index answers in well under a second

# Runs with the node's python3; prints one line per URL: "ok\tURL" or "fail\tURL\tREASON".
_CODE = """\
import sys, urllib.request
for url in sys.argv[1:]:
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=%d).close()
        print("ok", url, sep="\\t")
    except urllib.error.HTTPError as exc:
        print("ok" if exc.code < 500 else "fail", url, "HTTP %%d" %% exc.code, sep="\\t")
    except Exception as exc:
        print("fail", url, str(exc).replace("\\t", " ").replace("\\n", " ")[:200] or type(exc).__name__, sep="\\t")
""" % TIMEOUT_S


def remote_indexes(plan: Plan) -> list[str]:
    """The http(s) index and find-links URLs the plan's package steps install from (pure)."""
    urls: list[str] = []
    for step in plan.steps:
        if step.kind not in ("pip_install", "pip_tooling") or getattr(step.params, "no_index", False):
            continue
        p = step.params
        for url in [getattr(p, "index_url", None), *(getattr(p, "find_links", None) or [])]:
            if url and url.startswith(("http://", "https://")) and url not in urls:
                urls.append(url)
    return urls


def probe_command(urls: list[str], python: str = "python3") -> str:
    """The shell command that fetches each URL once on the node (pure)."""
    return shlex.join([python, "-c", _CODE, *urls])


def parse(output: str) -> dict[str, str | None]:
    """{url: None when it answered, else why not} from ``probe_command``'s output (pure)."""
    out: dict[str, str | None] = {}
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0] in ("ok", "fail"):
            out[parts[1]] = None if parts[0] == "ok" else ("\t".join(parts[2:]) or "no answer")
    return out


def unreachable(urls: list[str], rc: int, stdout: str, stderr: str) -> dict[str, str]:
    """{url: reason} for every URL the node could not reach; a URL the probe never answered for
    (python3 missing, the probe killed) counts as unreachable with the probe's own error."""
    answers = parse(stdout)
    fallback = (stderr.strip().splitlines() or [f"the probe exited {rc}"])[-1][:200]
    return {u: answers[u] if u in answers else fallback for u in urls if answers.get(u, fallback) is not None}
