"""A host or user name that ssh would read as an option (``-oProxyCommand=...``) or that holds
a space or control byte is refused where it is read (--hosts, an inventory), and the
unreachable-host hint quotes what it prints after ``--`` (issue 41)."""

from __future__ import annotations

import pytest

from envbuild.connect import ssh
from envbuild.connect.nodes import Node, parse_hosts, read_inventory
from envbuild.errors import InputError


@pytest.mark.parametrize("spec", ["-oProxyCommand=touch@x", "-oProxyCommand=x", "root@-oProxyCommand"])
def test_hosts_that_ssh_reads_as_options_are_refused(spec):
    with pytest.raises(InputError):
        parse_hosts(spec)


@pytest.mark.parametrize("field,value", [("ansible_host", "-oProxyCommand=touch /tmp/pwned"),
                                         ("ansible_user", "-oProxyCommand=id"),
                                         ("ansible_host", "node1\x1b]0;x\x07")])
def test_an_inventory_value_that_is_no_plain_name_is_refused_naming_it(tmp_path, field, value):
    inv = tmp_path / "inventory.yaml"
    import yaml

    inv.write_text(yaml.safe_dump({"all": {"hosts": {"n1": {field: value}}}}))
    with pytest.raises(InputError) as err:
        read_inventory(inv)
    assert f"host n1: {field}" in err.value.message and "not a host or user name" in err.value.message


def test_the_unreachable_hint_quotes_the_host_after_double_dash():
    node = Node(name="n", host="10.0.0.1", user="o'brien", port=2222)
    hint = ssh.failure(node, OSError("no route")).hint
    assert "`ssh -p 2222 -- 'o'\"'\"'brien@10.0.0.1' true`" in hint


def test_plain_hosts_still_parse():
    (a, b) = parse_hosts("root@node-1,10.0.0.2:2222")
    assert (a.user, a.host, b.host, b.port) == ("root", "node-1", "10.0.0.2", 2222)
