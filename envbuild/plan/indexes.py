"""The package indexes a plan installs from, read from its steps (pure): what the node must
reach before anything installs (``envbuild.facts.reach`` probes them), and the wheels the plan
takes from each, which the node's own find-links folders may serve instead."""

from __future__ import annotations

from envbuild.plan.model import Plan


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


def wheels_from(plan: Plan, url: str) -> list[str]:
    """``name-version`` (wheel file name style, lower case) of each package the plan installs
    from ``url`` (pure); empty when one of them is not pinned to one version."""
    wants: list[str] = []
    for step in plan.steps:
        if step.kind not in ("pip_install", "pip_tooling"):
            continue
        p = step.params
        for r in getattr(p, "requirements", None) or []:
            if url not in (r.index_url, r.find_links, getattr(p, "index_url", None), *(getattr(p, "find_links", None) or [])):
                continue
            if not r.version or not r.version[0].isdigit():
                return []
            wants.append(f"{r.name.replace('-', '_').lower()}-{r.version.split('+')[0]}")
    return sorted(set(wants))
