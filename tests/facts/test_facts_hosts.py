"""--hosts lists and Ansible inventories (read with Ansible's own parser)."""

import pytest

from envbuild.errors import InputError
from envbuild.facts.hosts import parse_hosts, read_inventory


def test_parse_hosts_user_is_sticky_and_ports_default():
    specs = parse_hosts("root@10.0.0.1,10.0.0.2:2222,alice@h3,[::1]:2022", port=22)
    assert [(s.user, s.host, s.port) for s in specs] == [
        ("root", "10.0.0.1", 22), ("root", "10.0.0.2", 2222), ("alice", "h3", 22), ("alice", "::1", 2022)]
    assert specs[1].name == "10.0.0.2:2222" and specs[0].name == "10.0.0.1"


@pytest.mark.parametrize("bad", ["", "a@@b", "h:0", "h:99999", "h:x"])
def test_parse_hosts_rejects(bad):
    with pytest.raises(InputError) as err:
        parse_hosts(bad)
    assert err.value.hint


def test_ini_inventory(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        "[gpu]\nn1 ansible_host=127.0.0.2 ansible_port=2201 ansible_user=root ansible_ssh_private_key_file=/k1\n"
        "n2 ansible_host=127.0.0.3\n[gpu:vars]\nansible_user=ops\n"
    )
    specs = read_inventory(inv, identity_file="/default_key", port=2222)
    assert [(s.name, s.host, s.port, s.user, s.identity_file) for s in specs] == [
        ("n1", "127.0.0.2", 2201, "root", "/k1"), ("n2", "127.0.0.3", 2222, "ops", "/default_key")]


def test_yaml_inventory(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    a:\n      ansible_host: 127.0.0.5\n      ansible_port: 2300\n")
    (spec,) = read_inventory(inv)
    assert (spec.host, spec.port, spec.name) == ("127.0.0.5", 2300, "a")


@pytest.mark.parametrize("content", ["garbage: [", "[empty]\n"])
def test_bad_inventory(tmp_path, content):
    inv = tmp_path / "inv.yml"
    inv.write_text(content)
    with pytest.raises(InputError) as err:
        read_inventory(inv)
    assert str(inv) in str(err.value)


def test_missing_inventory(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_inventory(tmp_path / "nope.ini")
