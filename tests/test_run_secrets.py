"""Secrets never reach a run directory; run folders are private; a plain verify checks the
local environment after a local run.

A real local provision (ansible-playbook runs) with tokens in the controller's environment.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from test_provision_interrupt import provision_argv, slow_recipe

pytestmark = pytest.mark.integration

SECRETS = {"HF_TOKEN": "sekrit-xyz", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
           "MY_DB_PASSWORD": "hunter2-hunter2"}


def envbuild(*args, env, timeout=600):
    return subprocess.run([sys.executable, "-m", "envbuild", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_no_secret_in_the_run_dir_private_modes_and_plain_verify(tmp_path):
    # the build prints what it sees: the secrets are not handed to ansible-playbook at all
    recipe, mirror = slow_recipe(tmp_path, ['echo "hf=${HF_TOKEN:-unset} aws=${AWS_SECRET_ACCESS_KEY:-unset}" > seen.txt'])
    home = tmp_path / "home"
    env = {**os.environ, **SECRETS, "ENVBUILD_HOME": str(home)}
    p = subprocess.run(provision_argv(recipe, mirror, tmp_path / "env"), capture_output=True, text=True,
                       timeout=600, env=env)
    assert p.returncode == 5, p.stdout[-3000:] + p.stderr[-2000:]  # no smoke: nothing judged (NOT JUDGED, exit 5)
    run = (home / "runs" / "latest").resolve()
    assert json.loads((run / "run.json").read_text())["status"] == "ok"

    hits = []
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            hits += [f"{path.relative_to(home)}: {name}" for name, value in SECRETS.items() if value.encode() in data]
    assert hits == []
    assert (tmp_path / "env" / "src" / "slowpkg" / "seen.txt").read_text() == "hf=unset aws=unset\n"

    for folder in (home / "runs", run, run / "nodes", run / "nodes" / "local"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for name in ("run.json", "events.jsonl", "nodes/local/result.json", "nodes/local/log.txt"):
        assert stat.S_IMODE((run / name).stat().st_mode) == 0o600, name

    # envbuild verify with no --hosts/--local after a local run observes this machine
    v = envbuild("verify", "--json", env=env)
    assert v.returncode == 0, v.stdout[-2000:] + v.stderr[-2000:]
    [node] = json.loads(v.stdout)["nodes"]
    assert node["node"] == "local" and node["status"] == "clean"
    r = envbuild("report", env=env)
    assert r.returncode == 5 and "Verdict: NOT JUDGED" in r.stdout, r.stdout[-2000:] + r.stderr


def test_inventory_password_never_enters_the_run_dir(tmp_path):
    """Not scrubbed afterwards: never there. The build step looks while the playbook runs: no
    file under ENVBUILD_HOME holds the password; one 0600 file outside it does, and Ansible
    merges it with the run's inventory; after the run it is gone."""
    password = "inv-sekrit-99"
    seen = tmp_path / "seen"
    seen.mkdir()
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    b64 = base64.b64encode(password.encode()).decode()  # the recipe (and so the plan) never holds it
    look = (f'pw=$(echo {b64} | base64 -d); '
            f'{{ grep -rlF "$pw" {home} || true; }} > {seen}/in_home.txt; '
            f'for f in $(grep -rlF "$pw" /dev/shm {tmp} 2>/dev/null); do stat -c "%a %n" "$f"; done > {seen}/files.txt; '
            f'ANSIBLE_HOME={seen}/ah {Path(sys.executable).parent}/ansible-inventory '
            f'-i {home}/runs/*/ansible/inventory/hosts.yml -i "$(cut -d" " -f2 {seen}/files.txt)" '
            f'--host box > {seen}/merged.json')
    recipe, mirror = slow_recipe(tmp_path, [look])
    inv = tmp_path / "nodes.yaml"
    inv.write_text("all:\n  hosts:\n    box:\n      ansible_connection: local\n"
                   f"      ansible_python_interpreter: {sys.executable}\n"
                   f"      ansible_become_password: {password}\n      ansible_password: {password}\n")
    p = subprocess.run(provision_argv(recipe, mirror, tmp_path / "env", "--inventory", str(inv)),
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "ENVBUILD_HOME": str(home), "TMPDIR": str(tmp)})
    assert p.returncode == 5, p.stdout[-3000:] + p.stderr[-2000:]  # no smoke: nothing judged (NOT JUDGED, exit 5)
    # during the run
    assert (seen / "in_home.txt").read_text() == ""
    [line] = (seen / "files.txt").read_text().splitlines()
    mode, path = line.split(" ", 1)
    assert mode == "600" and not Path(path).is_relative_to(home)
    merged = json.loads((seen / "merged.json").read_text())
    assert merged["ansible_become_password"] == password and merged["ansible_connection"] == "local"
    # after it
    assert not Path(path).exists()
    files = [f for f in home.rglob("*") if f.is_file() and not f.is_symlink()]
    [hosts] = [f for f in files if f.name == "hosts.yml"]
    assert "box:" in hosts.read_text() and "ansible_password" not in hosts.read_text()
    assert "ansible_become_password" not in hosts.read_text()
    assert [str(f) for f in files if password.encode() in f.read_bytes()] == []
    assert "***" not in hosts.read_text()  # nothing was scrubbed there: it was never written
