"""The node's Python for Ansible comes from its facts (issue 40): ``ansible_python`` on captured
and constructed interpreter lists, then a real provision with ``--hosts`` (no inventory, so no
``ansible_python_interpreter``) onto a loopback sshd node whose login PATH starts with real pyenv
shims, where Ansible's own discovery takes ``~/.pyenv/shims/python3.13`` and fails every module
("pyenv: python3.13: command not found")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envbuild.facts.model import Interpreter
from envbuild.facts.python import ansible_python

PYENV_SHIM = Path.home() / ".pyenv" / "shims" / "python3.13"


def _i(path: str, version: str) -> Interpreter:
    return Interpreter(path=path, version=version)


def test_the_system_python_of_the_recipes_minor_comes_first():
    pythons = [_i("/root/.pyenv/versions/3.13.0/bin/python3.13", "3.13.0"), _i("/usr/bin/python3", "3.11.2"),
               _i("/usr/bin/python3.12", "3.12.1"), _i("/opt/conda/bin/python3", "3.11.7")]
    assert ansible_python(pythons, "3.11").path == "/usr/bin/python3"
    assert ansible_python(pythons, "3.12").path == "/usr/bin/python3.12"
    # no system one of the recipe's minor: the newest system one, before any elsewhere
    assert ansible_python(pythons, "3.13").path == "/usr/bin/python3.12"
    assert ansible_python(pythons, None).path == "/usr/bin/python3.12"
    # nothing in a system folder: the recipe's minor, else the newest
    away = [_i("/opt/conda/bin/python3", "3.9.18"), _i("/home/u/.pyenv/versions/3.10.13/bin/python", "3.10.13")]
    assert ansible_python(away, "3.9").path == "/opt/conda/bin/python3"
    assert ansible_python(away, "3.11").path.endswith("3.10.13/bin/python")


def test_shims_and_pythons_ansible_cannot_run_are_never_chosen():
    assert ansible_python([_i("/root/.pyenv/shims/python3", "3.11.7"), _i("/usr/bin/python3", "3.6.9")], "3.11") is None
    assert ansible_python([], "3.11") is None
    assert ansible_python([_i("/usr/bin/python3", "3.8.10")], "3.6").path == "/usr/bin/python3"


def test_the_facts_of_a_real_machine_give_a_python_that_runs():
    """This machine's facts, gathered for real with its login PATH led by pyenv's shims where it
    has them: the choice is no shim and runs Ansible's module code's needs (json, the stdlib)."""
    from envbuild.facts.gather import gather_local

    shims = str(PYENV_SHIM.parent)
    env_path = f"{shims}:{os.environ['PATH']}" if PYENV_SHIM.exists() else os.environ["PATH"]
    saved = os.environ["PATH"]
    os.environ["PATH"] = env_path
    try:
        facts = gather_local()
    finally:
        os.environ["PATH"] = saved
    chosen = ansible_python(facts.pythons, "3.11")
    assert chosen is not None and "/shims/" not in chosen.path
    p = subprocess.run([chosen.path, "-c", "import json, sys; print(json.dumps(sys.version_info[:2]))"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout) == [int(x) for x in chosen.version.split(".")[:2]]


@pytest.mark.integration
def test_hosts_on_a_node_whose_login_path_has_pyenv_shims_provisions(tmp_path):
    """Real pyenv on this machine (root's ~/.bashrc runs `pyenv init`; CI's image has it), a
    loopback sshd node: first Ansible's own discovery on that node, shown failing as the issue
    says; then `envbuild provision --hosts` of a one-package recipe: ok, Ansible ran with the
    Python the facts found, said in an event."""
    from envbuild.testbed import sshd

    if not PYENV_SHIM.exists():
        pytest.skip(f"no pyenv shim {PYENV_SHIM} on this machine: the login PATH of its nodes has none")
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump({
        "schema": 1, "name": "tiny", "title": "one package", "description": "issue 40: the node's Python",
        "published": {"url": "https://example.org"}, "python": "3.11", "targets": ["local"],
        "packages": [{"name": "six", "version": "1.16.0", "why": "small, pure Python"}]}))
    with sshd.ssh_nodes(1, first_address=91, read_bashrc=True) as bed:  # its sessions run `pyenv init`
        inventory = tmp_path / "discovery.ini"
        inventory.write_text(bed.inventory_path.read_text().replace("ansible_python_interpreter=/usr/bin/python3\n", ""))
        ping = subprocess.run([str(Path(sys.executable).parent / "ansible"), "all", "-i", str(inventory), "-m", "ping"],
                              capture_output=True, text=True, timeout=120, env={**os.environ, **bed.env})
        if ping.returncode == 0:
            pytest.fail("Ansible's discovery worked on this node: the case is not met here\n" + ping.stdout[-1000:])
        assert "shims/python3" in ping.stdout and "command not found" in ping.stdout, ping.stdout[-1500:]

        node = bed.nodes[0]
        argv = [sys.executable, "-m", "envbuild", "provision", str(recipe), "--target", "local",
                "--hosts", f"{node.user}@{node.host}:{node.port}", "--identity", node.key_path,
                "--known-hosts", str(bed.known_hosts), "--prefix", str(tmp_path / "env"),
                "--no-smoke", "--json"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                           env={**os.environ, "ENVBUILD_HOME": str(tmp_path / "home"),
                                "ENVBUILD_LOCKDIR": str(tmp_path / "locks")})
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    result = next((x for x in lines if x.get("type") == "result"), None)
    assert result is not None, p.stderr[-3000:]
    assert [r["status"] for r in result["results"].values()] == ["ok"], (result, p.stderr[-3000:])
    said = [e["msg"] for e in lines if e.get("type") == "event" and e.get("step") == "preflight"]
    assert any(m.startswith("Ansible's modules run with /usr/bin/python3") for m in said), said
    installed = subprocess.run([str(tmp_path / "env/bin/python"), "-c", "import six; print(six.__version__)"],
                               capture_output=True, text=True, timeout=60)
    assert installed.stdout.strip() == "1.16.0", installed.stderr
