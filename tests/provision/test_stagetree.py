"""``provision --fanout``'s tree, as data (envbuild.provision.stagetree); where a node's copy came
from (envbuild.node.stage ``where_from``, every branch; Ansible's ``envbuild_stage`` module fed
real registered results, integration) and the event tracker's reading of it; the tree run for
real: tests/provision/test_fleet_tree.py."""

from __future__ import annotations

import hashlib
import sys
from types import SimpleNamespace

import pytest

from envbuild.connect.nodes import Node
from envbuild.execute.events import STAGE_MODULE, StepTracker
from envbuild.node.stage import KEPT_WHY, WHY_LENGTH, Stage, describe, truncate, where_from
from envbuild.shipped import PLAYBOOKS
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

    def feed(event, task, res, action="ansible.builtin.debug"):
        return tracker.feed({"event": event, "event_data": {"host": "n2", "task": f"provision : {task}", "res": res,
                                                            "task_action": action, "resolved_action": action}})

    feed("runner_on_ok", "Envbuild start", {"msg": "envbuild:start wheels"})
    feed("runner_on_unreachable", "Envbuild holder's copy, waited for", {"msg": "ssh: connect to host n1: refused"})
    # the old debug message is no longer read: only the module's typed result is
    feed("runner_on_ok", "Where this node's copy came from", {"msg": "envbuild:stage-from n1"})
    assert tracker.hosts["n2"].stage_from is None
    feed("runner_on_ok", "Another module's stage", {"stage": {"source": "holder", "holder": "n1", "why": ""}},
         action="some.other.module")
    assert tracker.hosts["n2"].stage_from is None
    out = feed("runner_on_ok", "Where this node's copy came from",
               {"changed": False, "stage": {"source": "controller", "holder": "n1", "why": "n1: not in the play"}},
               action=STAGE_MODULE)
    h = tracker.hosts["n2"]
    assert not h.unreachable and h.failed_step is None and h.current == "wheels"
    assert h.stage_from == "controller (n1: not in the play)"
    assert any("the fleet's archive from controller" in e.msg for e in out)
    feed("runner_on_unreachable", "Envbuild batch", {"msg": "ssh: connect to host n2: refused"})
    assert tracker.hosts["n2"].unreachable  # its own connection lost is still its own


# --- where the copy came from: envbuild.node.stage.where_from, every branch ---------------------

SHA = hashlib.sha256(b"the fleet's archive").hexdigest()
OTHER = hashlib.sha256(b"another archive").hexdigest()
# registered results as Ansible 2.19 registers them (shapes read from real runs: the
# integration test below feeds the module the real ones)
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False", "false_condition": "x"}
NO_FILE = {"changed": False, "stat": {"exists": False}}
UNREACHED = {"unreachable": True, "changed": False, "msg": "Task failed: Failed to connect to the host via ssh: "
                                                           "ssh: connect to host 10.0.0.1 port 22: Connection refused"}
TIMED_OUT = {"changed": False, "elapsed": 900, "msg": "Timeout when waiting for file /p/n1/.envbuild/fleet/a.tar.ok",
             "failed_when_result": False}
SETTLED = {"changed": False, "state": "present", "path": "/p/n1/.envbuild/fleet/a.tar.ok", "elapsed": 3}
REFUSED = {"changed": True, "rc": 1, "stdout": "", "msg": "non-zero return code",
           "stderr": "u@10.0.0.2: Permission denied (publickey).\r\nscp: Connection closed\n"}


def _stat(sha256):
    return {"changed": False, "stat": {"exists": True, "checksum": sha256}}


def _slurp(text):
    import base64

    return {"changed": False, "encoding": "base64", "source": "/p/n1/.envbuild/fleet/a.tar.ok",
            "content": base64.b64encode(text.encode()).decode()}


def _sent(rc=0, stderr=""):
    return {"changed": True, "rc": rc, "stdout": "", "stderr": stderr, "cmd": ["scp", "--", "a", "b"]}


def _from(**facts):
    args = {"holder": "n1", "holder_in_play": True, "why_controller": "", "kept": NO_FILE, "waited": SKIPPED,
            "served": SKIPPED, "sent": SKIPPED, "held": NO_FILE, **facts}
    return where_from(SHA, **args)


@pytest.mark.parametrize("facts, stage", [
    # kept: its checked copy of an earlier run, whatever else happened
    ({"kept": _stat(SHA)}, Stage("kept", "n1", KEPT_WHY)),
    ({"kept": _stat(SHA), "why_controller": "the tree's root", "holder": ""}, Stage("kept", "", KEPT_WHY)),
    # holder: scp exited 0 and the copy held now has the sha256
    ({"waited": SETTLED, "served": _slurp(SHA + "\n"), "sent": _sent(), "held": _stat(SHA)},
     Stage("holder", "n1", "")),
    # the tree gave it no holder: its reason
    ({"holder": "", "why_controller": "the tree's root"}, Stage("controller", "", "the tree's root")),
    ({"holder": "", "holder_in_play": False, "why_controller": "the controller knows no host key of it to give "
                                                              "its holder"},
     Stage("controller", "", "the controller knows no host key of it to give its holder")),
    # scp's stderr first, stripped
    ({"waited": SETTLED, "served": _slurp(SHA), "sent": REFUSED},
     Stage("controller", "n1", "n1: u@10.0.0.2: Permission denied (publickey).\r\nscp: Connection closed")),
    # then the wait's message: the holder out of reach, or its copy never settled
    ({"waited": UNREACHED}, Stage("controller", "n1", "n1: " + UNREACHED["msg"])),
    ({"waited": TIMED_OUT}, Stage("controller", "n1", "n1: " + TIMED_OUT["msg"])),
    # then the slurp's message: the settled copy could not be read
    ({"waited": SETTLED, "served": {"changed": False, "unreachable": True, "msg": "Task failed: gone"}},
     Stage("controller", "n1", "n1: Task failed: gone")),
    # then what was missing: settled with none, another sha256, or the sha256 and nothing came
    ({"waited": SETTLED, "served": _slurp("none\n")}, Stage("controller", "n1", "n1: it has no checked copy to give")),
    ({"waited": SETTLED, "served": _slurp(OTHER + "\n")},
     Stage("controller", "n1", f"n1: it served another sha256 ({OTHER})")),
    ({"waited": SETTLED, "served": _slurp(SHA), "sent": _sent(), "held": _stat(OTHER)},
     Stage("controller", "n1", "n1: no copy with the sha256 came from it")),
    ({"waited": SETTLED, "served": _slurp(SHA), "sent": _sent(rc=1), "held": NO_FILE},
     Stage("controller", "n1", "n1: no copy with the sha256 came from it")),
    # a holder not in the play (gone from the inventory's selection): its wait never ran
    ({"holder_in_play": False}, Stage("controller", "n1", "n1: not in the play")),
    # in the play, and no task said anything
    ({"waited": {}}, Stage("controller", "n1", "n1: its copy did not come")),
    # a stderr of blanks says nothing: the next reason
    ({"waited": TIMED_OUT, "sent": _sent(rc=1, stderr=" \n")},
     Stage("controller", "n1", "n1: " + TIMED_OUT["msg"])),
    # a scp that exited 0 with another file is not the holder's copy
    ({"waited": SETTLED, "served": _slurp(SHA), "sent": _sent(), "held": NO_FILE},
     Stage("controller", "n1", "n1: no copy with the sha256 came from it")),
])
def test_where_the_copy_came_from_on_every_branch(facts, stage):
    assert _from(**facts) == stage


def test_the_text_shown_is_todays_and_a_long_reason_is_cut_as_jinja_cut_it():
    assert describe(_from(kept=_stat(SHA))) == "kept (its checked copy of an earlier run)"
    assert describe(_from(waited=SETTLED, sent=_sent(), held=_stat(SHA))) == "n1"
    assert describe(_from(holder="", why_controller="the tree's root")) == "controller (the tree's root)"
    assert describe({"source": "controller", "holder": "n1", "why": "n1: x"}) == "controller (n1: x)"
    words = " ".join(f"word{i:03d}" for i in range(60))  # 479 characters
    cut = _from(waited=TIMED_OUT, sent=_sent(rc=1, stderr=words)).why
    assert cut.startswith("n1: word000 ") and cut.endswith("...") and len(cut) <= len("n1: ") + WHY_LENGTH
    assert cut[len("n1: "):-3] == words[:WHY_LENGTH - 3].rsplit(" ", 1)[0]  # cut at a word's end
    assert truncate("x" * (WHY_LENGTH + 5)) == "x" * (WHY_LENGTH + 5)  # Jinja's leeway of 5
    assert truncate("x" * (WHY_LENGTH + 6)) == "x" * (WHY_LENGTH - 3) + "..."


def test_the_modules_options_are_where_froms_arguments():
    import inspect

    from envbuild.node.stage import WHERE_FROM_ARGS

    assert tuple(inspect.signature(where_from).parameters) == WHERE_FROM_ARGS
    module = (PLAYBOOKS / "ansible_collections/envbuild/node/plugins/modules/envbuild_stage.py").read_text()
    spec = module[module.index("argument_spec=dict("):module.index("supports_check_mode")]
    assert [line.strip().split("=", 1)[0] for line in spec.splitlines()[1:] if "=dict(" in line] == list(WHERE_FROM_ARGS)


def test_where_from_refuses_no_sha256_and_describe_an_unknown_source():
    with pytest.raises(ValueError, match="sha256"):
        where_from("", holder="n1")
    with pytest.raises(ValueError, match="source 'elsewhere' is none of kept, holder, controller"):
        describe({"source": "elsewhere", "holder": "", "why": ""})


# --- the module, fed real registered results by a real play (integration) ----------------------

def _stage_play(folder, sha256: str) -> list:
    """A play that registers what the role's tasks register (a holder out of reach, a wait that
    times out, a settled copy, scp refused, a copy sent), then hands them to the module by FQCN,
    one task per way (as the role does: no loop), named "Stage: <way>"."""
    copy = f"{folder}/copy.tar"

    def stat(name, path, register):
        return {"name": name, "ansible.builtin.stat": {"path": path, "checksum_algorithm": "sha256"},
                "register": register}

    def wait(name, path, register, timeout=5, **extra):
        return {"name": name, "ansible.builtin.wait_for": {"path": path, "timeout": timeout}, "register": register,
                "failed_when": False, **extra}

    registered = [
        stat("Kept copy", copy, "kept"), stat("No copy", f"{folder}/absent", "absent"),
        {"name": "Skipped", "when": False, "ansible.builtin.command": {"argv": ["false"]}, "register": "skipped"},
        wait("Envbuild holder out of reach", copy + ".ok", "unreached", delegate_to="gone", ignore_unreachable=True),
        wait("Never settles", f"{folder}/never.ok", "timed_out", timeout=1),
        wait("Settled", copy + ".ok", "settled"),
        {"name": "Served the sha256", "ansible.builtin.slurp": {"src": copy + ".ok"}, "register": "served"},
        {"name": "Served none", "ansible.builtin.slurp": {"src": f"{folder}/none.ok"}, "register": "served_none"},
        {"name": "Refused", "ansible.builtin.command": {"argv": [
            "sh", "-c", "echo 'Permission denied (publickey).' >&2; exit 1"]},
         "register": "refused", "changed_when": True, "failed_when": False},
        {"name": "Sent", "ansible.builtin.command": {"argv": ["cp", copy, f"{folder}/got.tar"]}, "register": "sent"},
        stat("Held", f"{folder}/got.tar", "held"),
    ]
    ways = {"kept": {"kept": "kept"},
            "holder": {"waited": "settled", "served": "served", "sent": "sent", "held": "held"},
            "root": {"holder": "", "why_controller": "the tree's root"},
            "refused": {"waited": "settled", "served": "served", "sent": "refused"},
            "unreached": {"holder": "gone", "waited": "unreached"},
            "timed out": {"waited": "timed_out"},
            "none": {"waited": "settled", "served": "served_none"},
            "not in the play": {"holder": "gone"}}
    stages = []
    for way, given in ways.items():
        holder = given.get("holder", "holder")
        args = {"sha256": sha256, "holder": holder, "holder_in_play": f"{{{{ '{holder}' in ansible_play_hosts }}}}",
                "why_controller": given.get("why_controller", "")}
        for fact in ("kept", "waited", "served", "sent", "held"):
            args[fact] = "{{ %s }}" % given.get(fact, "absent" if fact in ("kept", "held") else "skipped")
        stages.append({"name": f"Stage: {way}", "envbuild.node.envbuild_stage": args})
    return [{"name": "Where copies came from", "hosts": "node,holder", "gather_facts": False,
             "tasks": [{"name": "One node tries", "when": "inventory_hostname == 'node'",
                        "block": registered + stages}]}]


@pytest.mark.integration
def test_the_module_reads_real_registered_results_and_the_tracker_its_typed_stage(tmp_path):
    """Ansible registers the results, templates them into the module's options, the module
    runs on the node and returns ``stage``; the tracker reads it as run.json shows it."""
    import ansible_runner
    import yaml

    (tmp_path / "copy.tar").write_bytes(b"the fleet's archive")
    (tmp_path / "copy.tar.ok").write_text(SHA + "\n")
    (tmp_path / "none.ok").write_text("none\n")
    play = tmp_path / "stage.yml"
    play.write_text(yaml.safe_dump(_stage_play(tmp_path, SHA), sort_keys=False))
    tracker, shown = StepTracker(), {}

    def handler(ev):
        tracker.feed(ev)
        task = str((ev.get("event_data") or {}).get("task") or "")
        if ev.get("event") == "runner_on_ok" and task.startswith("Stage: "):
            shown[task[len("Stage: "):]] = tracker.hosts["node"].stage_from
        return True

    inventory = ("node ansible_connection=local\nholder ansible_connection=local\n"
                 "gone ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh "
                 "ansible_ssh_common_args='-o BatchMode=yes -o ConnectTimeout=5'\n")
    (tmp_path / "runner").mkdir()
    r = ansible_runner.run(private_data_dir=str(tmp_path / "runner"), playbook=str(play), inventory=inventory,
                           quiet=True, event_handler=handler,
                           envvars={"ANSIBLE_COLLECTIONS_PATH": str(PLAYBOOKS),
                                    "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
                                    "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    assert r.status == "successful", r.stdout.read()[-3000:]
    unreached = shown.pop("unreached")
    assert unreached.startswith("controller (gone: ") and "Connection refused" in unreached, unreached
    assert shown == {
        "kept": "kept (its checked copy of an earlier run)",
        "holder": "holder",
        "root": "controller (the tree's root)",
        "refused": "controller (holder: Permission denied (publickey).)",
        "timed out": f"controller (holder: Timeout when waiting for file {tmp_path}/never.ok)",
        "none": "controller (holder: it has no checked copy to give)",
        "not in the play": "controller (gone: not in the play)",
    }
