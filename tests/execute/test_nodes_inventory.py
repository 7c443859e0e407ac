"""One node model: INI, YAML and JSON inventories read by Ansible into identical nodes; every
connection variable kept and given back by connection_vars; ports checked (fast tier)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from envbuild.connect.hostkeys import host_key_check
from envbuild.connect.nodes import INSECURE_SSH_ARGS, connection_vars, parse_hosts, read_inventory
from envbuild.connect.ssh import jump_hosts
from envbuild.errors import InputError
from support.clirun import envbuild as run_envbuild

COMMON = "-o ProxyJump=jump@10.0.0.1:2222 -o ServerAliveInterval=30"
HOSTS = {
    "gpu1": {"ansible_host": "10.0.0.4", "ansible_port": 2201, "ansible_user": "ops",
             "ansible_ssh_private_key_file": "/keys/id_ops", "ansible_become": True,
             "ansible_become_user": "root", "ansible_become_method": "sudo"},
    "gpu2": {"ansible_host": "10.0.0.5", "ansible_ssh_common_args": COMMON,
             "ansible_ssh_extra_args": "-o ForwardAgent=no"},
}
GROUP_VARS = {"ansible_python_interpreter": "/usr/bin/python3", "ansible_user": "ops"}


def write_all(tmp_path):
    """The same inventory as INI, YAML and JSON."""
    ini = tmp_path / "hosts.ini"
    ini.write_text(
        "[gpu]\n"
        "gpu1 ansible_host=10.0.0.4 ansible_port=2201 ansible_ssh_private_key_file=/keys/id_ops "
        "ansible_become=True ansible_become_user=root ansible_become_method=sudo\n"
        f"gpu2 ansible_host=10.0.0.5 ansible_ssh_common_args='{COMMON}' ansible_ssh_extra_args='-o ForwardAgent=no'\n"
        "[gpu:vars]\nansible_python_interpreter=/usr/bin/python3\nansible_user=ops\n")
    doc = {"all": {"children": {"gpu": {"hosts": {n: {k: v for k, v in hv.items() if k != "ansible_user"}
                                                  for n, hv in HOSTS.items()},
                                        "vars": GROUP_VARS}}}}
    yml = tmp_path / "hosts.yml"
    yml.write_text(yaml.safe_dump(doc))
    js = tmp_path / "hosts.json"
    js.write_text(json.dumps(doc))
    return ini, yml, js


def test_ini_yaml_json_read_into_identical_nodes(tmp_path):
    ini, yml, js = write_all(tmp_path)
    a, b, c = read_inventory(ini), read_inventory(yml), read_inventory(js)
    assert a == b == c
    assert [n.ansible_vars for n in a] == [n.ansible_vars for n in b] == [n.ansible_vars for n in c]
    g1, g2 = a
    assert (g1.name, g1.host, g1.port, g1.user, g1.identity_file, g1.python) == (
        "gpu1", "10.0.0.4", 2201, "ops", "/keys/id_ops", "/usr/bin/python3")
    assert g1.ansible_vars == {"ansible_become": True, "ansible_become_user": "root", "ansible_become_method": "sudo"}
    assert g2.ansible_vars == {"ansible_ssh_common_args": COMMON, "ansible_ssh_extra_args": "-o ForwardAgent=no"}
    assert not g1.insecure and not g2.insecure


def test_connection_vars_give_every_variable_back(tmp_path):
    ini, _, _ = write_all(tmp_path)
    g1, g2 = read_inventory(ini)
    assert connection_vars(g1) == {
        "ansible_host": "10.0.0.4", "ansible_port": 2201, "ansible_user": "ops", "ansible_connection": "ssh",
        "ansible_ssh_private_key_file": "/keys/id_ops", "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_become": True, "ansible_become_user": "root", "ansible_become_method": "sudo"}
    cv = connection_vars(g2)
    assert cv["ansible_ssh_common_args"] == COMMON and cv["ansible_ssh_extra_args"] == "-o ForwardAgent=no"
    assert "ansible_port" not in cv and cv["ansible_user"] == "ops"
    # what Ansible reads back from the rendered inventory is the node again
    out = tmp_path / "rendered.json"
    out.write_text(json.dumps({"all": {"hosts": {n.name: connection_vars(n) for n in (g1, g2)}}}))
    assert read_inventory(out) == [g1, g2]


def test_proxyjump_is_a_hop_for_fabric(tmp_path):
    _, yml, _ = write_all(tmp_path)
    _, g2 = read_inventory(yml)
    (hop,) = jump_hosts(g2)
    assert (hop.host, hop.user, hop.port) == ("10.0.0.1", "jump", 2222)
    (n,) = parse_hosts("h", known_hosts=[])
    assert jump_hosts(n) == []


def test_insecure_and_known_hosts_reach_ansible_first(tmp_path, monkeypatch):
    monkeypatch.delenv("ENVBUILD_KNOWN_HOSTS", raising=False)
    _, yml, _ = write_all(tmp_path)
    _, g2 = read_inventory(yml, insecure=True)
    assert g2.insecure and connection_vars(g2)["ansible_ssh_common_args"] == f"{INSECURE_SSH_ARGS} {COMMON}"
    _, g2 = read_inventory(yml, known_hosts=["/kh/a", "/kh/b c"])
    args = connection_vars(g2)["ansible_ssh_common_args"]
    assert args == f"""-o 'UserKnownHostsFile=/kh/a "/kh/b c"' {COMMON}"""
    assert host_key_check(g2).files == ("/kh/a", "/kh/b c", "/etc/ssh/ssh_known_hosts")
    # the rendered inventory, read again without --known-hosts, checks against the same files
    out = tmp_path / "rendered.json"
    out.write_text(json.dumps({"all": {"hosts": {g2.name: connection_vars(g2)}}}))
    (again,) = read_inventory(out, known_hosts=None)
    assert host_key_check(again) == host_key_check(g2)


def test_host_key_check_follows_the_ssh_args(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ENVBUILD_KNOWN_HOSTS", raising=False)
    (plain,) = parse_hosts("h")
    assert host_key_check(plain).mode == "strict"
    assert host_key_check(plain).files == (f"{tmp_path}/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts")
    inv = tmp_path / "inv.ini"
    inv.write_text("[g]\n"
                   "a ansible_ssh_common_args='-o UserKnownHostsFile=/kh/x -o GlobalKnownHostsFile=/dev/null'\n"
                   "b ansible_ssh_extra_args='-o StrictHostKeyChecking=no'\n"
                   "c ansible_ssh_common_args='-o StrictHostKeyChecking=accept-new'\n"
                   "d envbuild_insecure=true\n")
    a, b, c, d = read_inventory(inv)
    assert (host_key_check(a).mode, host_key_check(a).files) == ("strict", ("/kh/x",))
    assert b.insecure and host_key_check(b).mode == "off"  # the run records it: nothing was checked
    assert not c.insecure and host_key_check(c).mode == "accept-new"
    assert d.insecure
    monkeypatch.setenv("ENVBUILD_KNOWN_HOSTS", "/kh/env1:/kh/env2")
    (e,) = parse_hosts("h")
    assert e.known_hosts == ("/kh/env1", "/kh/env2") and host_key_check(e).files[:2] == ("/kh/env1", "/kh/env2")


def test_templates_and_group_vars_are_resolved_by_ansible(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("bastion: admin@10.1.0.1\nansible_user: ops\n")
    inv = tmp_path / "inv.ini"
    inv.write_text("[g]\nn1 ansible_host=10.1.0.9 ansible_ssh_common_args='-J {{ bastion }}'\n")
    (n,) = read_inventory(inv)
    assert n.user == "ops" and n.ansible_vars == {"ansible_ssh_common_args": "-J admin@10.1.0.1"}
    inv.write_text("[g]\nn1 ansible_user='{{ nobody_defined_this }}'\n")
    with pytest.raises(InputError, match="n1"):
        read_inventory(inv)


@pytest.mark.parametrize("bad", ["h:0", "h:99999", "h:x", "root@h:", "a b"])
def test_hosts_bad_ports_refused(bad):
    with pytest.raises(InputError) as err:
        parse_hosts(bad)
    assert err.value.exit_code == 2 and err.value.hint


@pytest.mark.parametrize("port", ["0", "99999", "'ssh'", "-1"])
def test_inventory_bad_port_names_host_and_field(tmp_path, port):
    inv = tmp_path / "inv.ini"
    inv.write_text(f"[g]\nok ansible_port=22\nbad1 ansible_port={port}\n")
    with pytest.raises(InputError) as err:
        read_inventory(inv)
    assert "ansible_port" in str(err.value) and "bad1" in str(err.value) and str(inv) in str(err.value)


def test_bad_ports_exit_2_on_the_command_line(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    n1: {ansible_host: 127.0.0.2, ansible_port: 70000}\n")
    for args in (["facts", "--hosts", "root@127.0.0.2:99999"], ["facts", "--hosts", "127.0.0.2:0"],
                 ["facts", "--inventory", str(inv)]):
        r = run_envbuild(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert "not a TCP port" in r.stderr and "hint: ports are 1-65535" in r.stderr
    assert "ansible_port" in r.stderr and "n1" in r.stderr


def test_local_connection_in_an_inventory(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    ctl: {ansible_connection: local, ansible_become: true}\n")
    (n,) = read_inventory(inv)
    assert n.is_local and connection_vars(n) == {"ansible_connection": "local", "ansible_become": True}


@pytest.mark.process  # a segmentation fault would take the test process with it
@pytest.mark.parametrize("shape", ["json", "yaml"])
def test_a_deeply_nested_inventory_is_refused_not_a_crash(tmp_path, shape):
    inv = tmp_path / f"deep.{shape}"
    if shape == "json":
        inv.write_text('{"all": ' + "[" * 200000 + "]" * 200000 + "}")
    else:
        inv.write_text("all:\n  hosts:\n    n1: {ansible_host: 127.0.0.2, x: " + "[" * 500 + "]" * 500 + "}\n")
    r = subprocess.run([sys.executable, "-m", "envbuild", "facts", "--inventory", str(inv)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    assert "more than 64 levels deep" in r.stderr and "Traceback" not in r.stderr
