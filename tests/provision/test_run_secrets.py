"""Secrets never reach a run directory; run folders are private; a plain verify checks the
local environment after a local run.

A real local provision (ansible-playbook runs) with tokens in the controller's environment.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support.slowrecipe import provision_argv, slow_recipe

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


def suite_folder(tmp_path: Path) -> Path | None:
    """The suite's own folder on /dev/shm, where .ci/test puts its temp files on a tmpfs: the
    tests below leave it out when they look through /dev/shm, as it holds their inventories (the
    input, password included) and other tests' copies of this file. The controller's temporary
    folder and home, inside it, are looked through on their own."""
    return Path("/dev/shm", tmp_path.relative_to("/dev/shm").parts[0]) if tmp_path.is_relative_to("/dev/shm") else None


def test_inventory_password_never_enters_the_run_dir(tmp_path):
    """Not scrubbed afterwards: never there. The build step looks while the playbook runs: no
    file anywhere holds the password (under ENVBUILD_HOME, /dev/shm or the temporary folder);
    a link outside ENVBUILD_HOME to envbuild's 0600 memory file serves it, and Ansible merges it
    with the run's inventory; after the run the link is gone."""
    password = "inv-sekrit-99"
    seen = tmp_path / "seen"
    seen.mkdir()
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    b64 = base64.b64encode(password.encode()).decode()  # the recipe (and so the plan) never holds it
    suite = suite_folder(tmp_path)
    exclude = f"--exclude-dir={shlex.quote(suite.name)}" if suite else ""
    look = (f'pw=$(echo {b64} | base64 -d); '
            f'{{ grep -rlF "$pw" {home} || true; }} > {seen}/in_home.txt; '
            f'{{ grep -rlF "$pw" {exclude} /dev/shm {tmp} 2>/dev/null || true; }} > {seen}/regular.txt; '
            f'find /dev/shm {tmp} -maxdepth 2 -path "*/envbuild-inventory-*" -type l -newer {seen}/start '
            f'-exec stat -L -c "%a %n" {{}} + > {seen}/files.txt; '
            f'ANSIBLE_HOME={seen}/ah {Path(sys.executable).parent}/ansible-inventory '
            f'-i {home}/runs/*/ansible/inventory/hosts.yml -i "$(cut -d" " -f2 {seen}/files.txt)" '
            f'--host box > {seen}/merged.json')
    recipe, mirror = slow_recipe(tmp_path, [look])
    (seen / "start").touch()  # this run's pipe is newer (a killed run may have left an empty one)
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
    assert (seen / "regular.txt").read_text() == ""  # grep -r does not follow the link
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


def test_a_killed_controller_leaves_no_credentials_on_disk(tmp_path):
    """``kill -9`` of envbuild while the playbook runs: the link to its memory file may be left
    behind, dangling; no file under /dev/shm, the temporary folder or ENVBUILD_HOME holds the
    password, and nothing left can be read for it."""
    import signal
    import time

    password = "kill9-sekrit-42"
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    started = tmp_path / "started"
    recipe, mirror = slow_recipe(tmp_path, [f"touch {started}", "sleep 60"])
    inv = tmp_path / "nodes.yaml"
    inv.write_text("all:\n  hosts:\n    box:\n      ansible_connection: local\n"
                   f"      ansible_python_interpreter: {sys.executable}\n"
                   f"      ansible_become_password: {password}\n")
    before = set(Path("/dev/shm").glob("envbuild-inventory-*"))
    proc = subprocess.Popen(provision_argv(recipe, mirror, tmp_path / "env", "--inventory", str(inv)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "ENVBUILD_HOME": str(home), "TMPDIR": str(tmp)})
    try:
        deadline = time.time() + 300
        while not started.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert started.exists(), "the build step never started"
        proc.send_signal(signal.SIGKILL)  # the controller only: its playbook is orphaned
        proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    leaks, left = [], sorted(set(Path("/dev/shm").glob("envbuild-inventory-*")) - before)
    suite = suite_folder(tmp_path)
    for root in (Path("/dev/shm"), tmp, home):
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if Path(folder, d) != suite]
            for path in (Path(folder, n) for n in names):
                try:
                    if path.is_file() and password.encode() in path.read_bytes():  # follows links
                        leaks.append(str(path))
                except (PermissionError, FileNotFoundError, OSError):
                    continue
    assert leaks == []
    for folder in left:  # what the killed run left: a dangling link to a memory file now gone
        assert [p.name for p in folder.iterdir()] == ["credentials.yml"]
        assert (folder / "credentials.yml").is_symlink() and not (folder / "credentials.yml").exists()
        shutil.rmtree(folder)
