"""A fleet's wheels archive sent down a fan-out tree of the nodes instead of a star (issue 38).

Without a tree the controller sends every node its own copy of the fleet's archive (about
222 MB for cpu-reference), N copies over its one uplink. With ``provision --fanout K`` the
controller sends one copy, to the tree's root; every node that holds a copy whose sha256 it
checked then sends it on to the K nodes below it, by Ansible's own delegation: the node's
task runs ``scp`` ON ITS HOLDER (``delegate_to``), from the holder's kept copy to its own
(role task file ``stage_tree.yml``). The node checks the sha256 of what it got; a holder that
is gone, fails, has no copy, cannot log in to it or sends a different file costs only a
fallback: the node takes the controller's copy, as without a tree. A holder's copy is
"settled" for the nodes below it (``<keep>.ok``: its sha256 once checked, else ``none``) by the
role whatever happens to the holder: they wait for that, not for a fixed time. Where the copy
came from, and why, is decided on the node from what those tasks registered
(``envbuild/node/stage.py``, Ansible's ``envbuild_stage``), and read back as a typed result.

What the holder needs, and gets from here as data:

- the node's host keys as the controller knows them (its known_hosts files, the ones Ansible
  checks), written under an alias (``HostKeyAlias``) into a file of the holder's: the holder
  checks them strictly (``StrictHostKeyChecking=yes``, ``BatchMode=yes``); a node whose key the
  controller does not know is not served by another node;
- a way to log in to the node: the holder's own SSH setup (a cluster's node-to-node keys), or
  ``--node-identity PATH``, a private key that lies at PATH on the nodes. envbuild never sends a
  key or forwards an agent.

``fanout_tree`` and ``tree_vars`` are pure; ``stage_vars`` reads the controller's known_hosts
and hashes the archive.
"""

from __future__ import annotations

import posixpath
import re

from envbuild.connect.hostkeys import known_keys
from envbuild.fsio import sha256_file

# How long a node waits for its holder's copy to settle (the role settles it when the holder's
# step ends, fails or does not run, and at the end of its play in any case): a safety net for
# a holder that hangs, after which the node takes the controller's copy.
WAIT_S = 900


def fanout_tree(hosts: list[str], width: int) -> dict[str, str | None]:
    """{host: the host it takes the archive from, None for the controller}: ``hosts`` in order
    as a complete ``width``-ary tree, the first one its root (a breadth-first layout: the
    nodes of each level are served by the level above, so the depth is log_width(N)).

    >>> fanout_tree(["a", "b", "c", "d", "e"], 2)
    {'a': None, 'b': 'a', 'c': 'a', 'd': 'b', 'e': 'b'}
    >>> fanout_tree(["a", "b", "c"], 1)
    {'a': None, 'b': 'a', 'c': 'b'}
    """
    if width < 1:
        raise ValueError("a fan-out tree needs width >= 1")
    return {h: (hosts[(i - 1) // width] if i else None) for i, h in enumerate(hosts)}


def _wheels(plan):
    return next((s for s in plan.steps if s.id == "wheels"), None)


def fleet_archive(plan) -> str | None:
    """The controller path of the fleet's archive this plan's ``wheels`` step unpacks."""
    step = _wheels(plan)
    return getattr(step.params, "archive", "") or None if step is not None else None


def _keep(plan, archive: str) -> str:
    """Where a node keeps its checked copy (to serve the nodes below it): beside the wheels."""
    return posixpath.join(plan.prefix, ".envbuild", "fleet", posixpath.basename(archive))


def tree_vars(plans: dict, nodes: dict, width: int, sha256: str, archive: str, keys: dict[str, list[str]],
              identity: str | None) -> dict[str, dict]:
    """Each tree node's ``provision_stage`` host variable (see the module docstring). ``nodes``:
    {name: connect.nodes.Node}; ``keys``: {name: ["TYPE BASE64", ...]} as the controller knows
    them. Pure."""
    order = sorted(n for n in plans if fleet_archive(plans[n]) == archive)
    holders = fanout_tree(order, width)
    out = {}
    for name in order:
        node, holder = nodes[name], holders[name]
        # the inventory's name made a plain word: it names a file on the holder and an ssh option
        alias = "envbuild-fleet-" + re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
        served = holder is not None and bool(keys.get(name))
        host = f"[{node.host}]" if ":" in node.host else node.host
        out[name] = {
            "archive": archive, "sha256": sha256, "keep": _keep(plans[name], archive),
            "from": holder if served else "",
            "holder_keep": _keep(plans[holder], archive) if served else "",
            "holder_tmp": posixpath.join(plans[holder].prefix, ".envbuild", "tmp") if served else "",
            "alias": alias, "known_hosts": "".join(f"{alias} {k}\n" for k in keys.get(name, [])),
            "to": f"{node.user}@{host}" if node.user else host, "port": int(node.port or 22),
            "identity": identity or "", "wait_s": WAIT_S,
            "why_controller": ("the tree's root" if holder is None else
                               "" if served else "the controller knows no host key of it to give its holder"),
        }
    return out


def stage_vars(plans: dict, nodes: list, width: int, identity: str | None) -> dict[str, dict]:
    """``tree_vars`` for a provision's SSH nodes and its fleet archive ({} when there is none:
    one node, a bundle, nothing pushed)."""
    by_name = {n.name: n for n in nodes if not n.is_local and n.name in plans}
    archives = {fleet_archive(plans[n]) for n in by_name} - {None}
    if len(by_name) < 2 or len(archives) != 1:
        return {}
    archive = archives.pop()
    keys = {name: known_keys(node) for name, node in by_name.items()}
    return tree_vars({n: plans[n] for n in by_name}, by_name, width, sha256_file(archive), archive, keys, identity)


def summary(tree: dict[str, dict], fanout: int) -> dict | None:
    """run.json's ``fleet.tree`` (``FleetTree``); None when no node went down a tree."""
    if not tree:
        return None
    return {"fanout": fanout, "sha256": next(iter(tree.values()))["sha256"],
            "holders": {name: data["from"] or None for name, data in sorted(tree.items())}}
