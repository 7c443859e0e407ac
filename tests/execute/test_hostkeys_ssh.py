"""SSH host keys are checked as ssh and Ansible check them, on real loopback sshd nodes.

Unknown key: refused (exit 3, the host, the files, ssh-keyscan and --insecure named), accepted
with --insecure and a warning. Known key: accepted (--known-hosts, $ENVBUILD_KNOWN_HOSTS, the
inventory's UserKnownHostsFile, or a line ssh-keyscan wrote). Changed key: refused by envbuild
and by Ansible alike. ProxyJump in the inventory: Fabric goes through the jump host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.connect import ssh
from envbuild.connect.nodes import connection_vars, read_inventory
from envbuild.testbed.sshd import free_port, rekey, ssh_nodes

pytestmark = pytest.mark.integration


def envbuild(*args, home: Path, env: dict | None = None):
    """envbuild with its own HOME (no ~/.ssh/known_hosts of the person running the tests)."""
    full = {**os.environ, "HOME": str(home), **(env or {})}
    full.pop("ENVBUILD_KNOWN_HOSTS", None) if "ENVBUILD_KNOWN_HOSTS" not in (env or {}) else None
    return subprocess.run([sys.executable, "-m", "envbuild", *args], capture_output=True, text=True,
                          timeout=300, env=full)


def test_unknown_key_refused_then_insecure_accepts_loudly(ssh_nodes, tmp_path):
    node = ssh_nodes.nodes[0]
    r = envbuild("facts", "--hosts", node.address, "-i", node.key_path, "--json", home=tmp_path)
    assert r.returncode == 3, r.stderr
    lookup = f"[{node.host}]:{node.port}"
    assert f"the SSH host key of {lookup} is unknown" in r.stderr
    assert f"{tmp_path}/.ssh/known_hosts (missing)" in r.stderr and "SHA256:" in r.stderr
    assert "hint: if SHA256:" in r.stderr and f"ssh-keyscan -p {node.port} {node.host}" in r.stderr
    assert "--insecure" in r.stderr and "Traceback" not in r.stderr and r.stdout == ""

    r = envbuild("facts", "--hosts", node.address, "-i", node.key_path, "--json", "--insecure", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["host"] == f"{node.host}:{node.port}"
    assert f"warning: {node.host}:{node.port} ({lookup}): SSH host key NOT checked" in r.stderr
    assert not (tmp_path / ".ssh" / "known_hosts").exists()  # --insecure writes nothing


def test_known_key_accepted_from_each_source(ssh_nodes, tmp_path):
    node = ssh_nodes.nodes[1]
    base = ("facts", "--hosts", node.address, "-i", node.key_path, "--json")
    for args, env in (((*base, "--known-hosts", str(ssh_nodes.known_hosts)), None),
                      (base, ssh_nodes.env),
                      (("facts", "--inventory", str(ssh_nodes.inventory_path), "--json"), None)):
        r = envbuild(*args, home=tmp_path, env=env)
        assert r.returncode == 0, (args, r.stderr)
        assert "warning" not in r.stderr
    # the hint's own workflow: ssh-keyscan into ~/.ssh/known_hosts, then it is known
    scan = subprocess.run(["ssh-keyscan", "-p", str(node.port), node.host], capture_output=True, text=True,
                          timeout=30, check=True)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "known_hosts").write_text(scan.stdout)
    r = envbuild(*base, home=tmp_path)
    assert r.returncode == 0, r.stderr


def ansible_raw(inventory: Path, home: Path, tag: str) -> subprocess.CompletedProcess:
    """`ansible all -m raw -a true` with host key checking on, as provision runs it (its own
    ControlPath per ``tag``: a persisted master connection would skip the key exchange)."""
    bin_dir = Path(sys.executable).parent
    a = home / f"ansible-{tag}"
    from envbuild.execute.ansible import control_path_dir

    env = {**os.environ, "HOME": str(home), "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_HOME": str(a),
           "ANSIBLE_LOCAL_TEMP": str(a / "tmp"),
           # a long pytest folder would pass the 108-byte limit of a Unix socket: provision's rule
           "ANSIBLE_SSH_CONTROL_PATH_DIR": control_path_dir(a / "cp"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([str(bin_dir / "ansible"), "all", "-i", str(inventory), "-m", "raw", "-a", "true"],
                          capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)


def test_changed_key_refused_like_ansible_refuses_it(tmp_path):
    with ssh_nodes(1, first_address=20, base_dir=str(tmp_path)) as bed:
        node = bed.nodes[0]
        args = ("facts", "--hosts", node.address, "-i", node.key_path, "--known-hosts", str(bed.known_hosts))
        assert envbuild(*args, home=tmp_path).returncode == 0
        (n,) = read_inventory(bed.inventory_path)
        rendered = tmp_path / "rendered.json"
        rendered.write_text(json.dumps({"all": {"hosts": {n.name: connection_vars(n)}}}))
        assert ansible_raw(rendered, tmp_path, "before").returncode == 0

        rekey(bed, node.name)  # a new host key; known_hosts still has the old one
        r = envbuild(*args, home=tmp_path)
        assert r.returncode == 3, r.stderr
        lookup = f"[{node.host}]:{node.port}"
        assert f"the SSH host key of {lookup} CHANGED: {bed.known_hosts} has SHA256:" in r.stderr
        assert f"ssh-keygen -R '{lookup}' -f {bed.known_hosts}" in r.stderr and "--insecure" in r.stderr
        r = envbuild("facts", "--inventory", str(bed.inventory_path), home=tmp_path)  # same through the inventory
        assert r.returncode == 3 and "CHANGED" in r.stderr
        a = ansible_raw(rendered, tmp_path, "after")  # Ansible decides the same on the same node
        assert a.returncode != 0 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in a.stdout + a.stderr

        r = envbuild(*args, "--insecure", home=tmp_path)
        assert r.returncode == 0 and "SSH host key NOT checked" in r.stderr


def test_proxyjump_in_the_inventory_goes_through_the_jump_host(ssh_nodes, tmp_path):
    jump, target = ssh_nodes.nodes[0], ssh_nodes.nodes[2]
    inv = tmp_path / "jump.ini"

    def write(jump_port: int) -> None:
        inv.write_text(
            f"[nodes]\nbehind ansible_host={target.host} ansible_port={target.port} ansible_user={target.user} "
            f"ansible_ssh_private_key_file={target.key_path}\n[nodes:vars]\n"
            f"ansible_ssh_common_args='-o UserKnownHostsFile={ssh_nodes.known_hosts} "
            f"-o ProxyJump={jump.user}@{jump.host}:{jump_port}'\n")

    write(jump.port)
    (node,) = read_inventory(inv)
    rc, out, _ = ssh.run(node, "echo through", timeout=30)
    assert (rc, out) == (0, "through\n")
    r = envbuild("facts", "--inventory", str(inv), "--json", home=tmp_path)
    assert r.returncode == 0, r.stderr

    dead = free_port(jump.host)
    write(dead)
    r = envbuild("facts", "--inventory", str(inv), home=tmp_path)
    assert r.returncode == 3
    assert f"via {jump.user}@{jump.host}:{dead}" in r.stderr and f"{jump.host}:{dead}" in r.stderr
