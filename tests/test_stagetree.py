"""``provision --fanout``'s tree, as data (envbuild.provision.stagetree), and the event tracker's
reading of it; the tree run for real: tests/test_fleet_tree.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envbuild.connect.nodes import Node
from envbuild.execute.events import StepTracker
from envbuild.provision.stagetree import fanout_tree, summary, tree_vars


def _plan(prefix: str, archive: str = "/home/u/.envbuild/fleet/abc.tar", digest: str = "d" * 64):
    wheels = SimpleNamespace(id="wheels", kind="wheels", digest=digest, params=SimpleNamespace(archive=archive))
    return SimpleNamespace(prefix=prefix, steps=[SimpleNamespace(id="environment", kind="venv", params=None),
                                                 wheels])


def test_a_tree_sends_one_copy_from_the_controller_and_at_most_width_from_each_node():
    hosts = [f"n{i:02d}" for i in range(16)]
    for width in (1, 2, 4, 8):
        holders = fanout_tree(hosts, width)
        assert [h for h, src in holders.items() if src is None] == ["n00"]  # one copy from the controller
        sent = {h: sum(1 for src in holders.values() if src == h) for h in hosts}
        assert max(sent.values()) == width
        for h, src in holders.items():  # every holder comes before the node it serves
            assert src is None or hosts.index(src) < hosts.index(h)
    with pytest.raises(ValueError):
        fanout_tree(hosts, 0)


def test_each_node_gets_its_holders_paths_its_own_host_keys_and_nothing_is_templated():
    plans = {"a": _plan("/p/a", digest="1" * 64), "b": _plan("/p/b", digest="2" * 64),
             "c": _plan("/p/{{ lookup('pipe','id') }}", digest="3" * 64)}
    nodes = {"a": Node("a", host="10.0.0.1", user="u", port=22), "b": Node("b", host="fe80::2", user="u", port=2222),
             "c": Node("c", host="10.0.0.3")}
    keys = {"a": ["ssh-ed25519 AAAA"], "b": ["ssh-ed25519 BBBB", "ssh-rsa CCCC"], "c": []}
    tree = tree_vars(plans, nodes, 1, "f" * 64, "/home/u/.envbuild/fleet/abc.tar", keys, "/home/u/.ssh/id_fleet")
    assert tree["a"]["from"] == "" and tree["a"]["why_controller"] == "the tree's root"
    b = tree["b"]
    assert b["from"] == "a" and b["holder_keep"] == "/p/a/.envbuild/fleet/abc.tar"
    assert b["keep"] == "/p/b/.envbuild/fleet/abc.tar" and b["to"] == "u@[fe80::2]" and b["port"] == 2222
    assert b["known_hosts"] == "envbuild-fleet-b ssh-ed25519 BBBB\nenvbuild-fleet-b ssh-rsa CCCC\n"
    assert b["identity"] == "/home/u/.ssh/id_fleet" and b["sha256"] == "f" * 64
    # c: the controller knows no host key of it, so its holder may not send it anything
    assert tree["c"]["from"] == "" and "knows no host key" in tree["c"]["why_controller"]
    from envbuild.render.ansible import dump_unsafe

    keep_c = next(line for line in dump_unsafe(tree).splitlines() if "keep:" in line and "lookup" in line)
    assert keep_c.split("keep:", 1)[1].strip().startswith("!unsafe ")  # data in the inventory, never a template
    # an inventory name is no path on the holder and no second known_hosts line
    odd = tree_vars({"a": _plan("/p/a"), "../../x\nevil": _plan("/p/b")},
                    {"a": Node("a", host="h1"), "../../x\nevil": Node("../../x\nevil", host="h2")}, 1, "f" * 64,
                    "/home/u/.envbuild/fleet/abc.tar", {"a": ["k A"], "../../x\nevil": ["k B"]}, None)
    named = odd["../../x\nevil"]
    assert named["alias"] == "envbuild-fleet-_.._x_evil" and named["known_hosts"] == "envbuild-fleet-_.._x_evil k B\n"
    assert summary(tree, 1) == {"fanout": 1, "sha256": "f" * 64, "holders": {"a": None, "b": "a", "c": None}}
    assert summary({}, 1) is None


def test_a_holder_out_of_reach_is_not_the_nodes_failure_and_the_copys_origin_is_kept():
    tracker = StepTracker()

    def feed(event, task, res):
        return tracker.feed({"event": event, "event_data": {"host": "n2", "task": f"provision : {task}", "res": res}})

    feed("runner_on_ok", "Envbuild start", {"msg": "envbuild:start wheels"})
    feed("runner_on_unreachable", "Envbuild holder's copy, waited for", {"msg": "ssh: connect to host n1: refused"})
    out = feed("runner_on_ok", "Where this node's copy came from",
               {"msg": "envbuild:stage-from controller (n1: not in the play)"})
    h = tracker.hosts["n2"]
    assert not h.unreachable and h.failed_step is None and h.current == "wheels"
    assert h.stage_from == "controller (n1: not in the play)"
    assert any("the fleet's archive from controller" in e.msg for e in out)
    feed("runner_on_unreachable", "Envbuild batch", {"msg": "ssh: connect to host n2: refused"})
    assert tracker.hosts["n2"].unreachable  # its own connection lost is still its own
