"""Run the provision playbook with ansible-runner in a private folder under the run directory.

Layout (ansible-runner's own): ``<run>/ansible/{env/, inventory/hosts.json, artifacts/}``;
the project is ``playbooks/`` of this checkout (``PLAYBOOKS``). Nothing lands in ``~/.ansible``:
ANSIBLE_HOME, ANSIBLE_LOCAL_TEMP and ANSIBLE_SSH_CONTROL_PATH_DIR all point into the run folder.
A failing node does not stop the others (no any_errors_fatal; linear strategy).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import EnvironmentProblem
from envbuild.execute.events import EventSink, StepTracker
from envbuild.fsio import write_atomic
from envbuild.render.ansible import Rendered

PLAYBOOKS = Path(os.environ.get("ENVBUILD_PLAYBOOKS")
                 or Path(__file__).resolve().parents[2] / "playbooks")
PLAYBOOK = "provision.yml"


@dataclass
class AnsibleJob:
    """The files of one run, written before anything runs (so --dry-run can show them)."""

    private_dir: Path
    inventory: Path
    extravars: Path
    envvars: dict[str, str]
    forks: int

    def command(self) -> str:
        """The same run by hand."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.envvars.items())
                       if k.startswith("ANSIBLE_") and k != "ANSIBLE_HOME")
        return (f"{env} ansible-playbook -i {shlex.quote(str(self.inventory))} "
                f"{shlex.quote(str(PLAYBOOKS / PLAYBOOK))} -e @{shlex.quote(str(self.extravars))} "
                f"--forks {self.forks}")


def control_path_dir(wanted: Path) -> str:
    """``wanted``, or a short /tmp folder named after it when the socket path would pass the
    108-byte limit of Unix sockets (ssh adds ~30 characters to the folder)."""
    if len(str(wanted)) <= 70:
        return str(wanted)
    import hashlib

    return f"/tmp/envbuild-cp-{hashlib.sha256(str(wanted).encode()).hexdigest()[:10]}"


def ansible_env(private_dir: Path, *, insecure: bool) -> dict[str, str]:
    """Environment for ansible-playbook: everything in the run folder, pipelining on."""
    home = private_dir / "home"
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    return {
        "PATH": bin_dir + (os.pathsep + path if path else ""),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": control_path_dir(home / "cp"),
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_HOST_KEY_CHECKING": "False" if insecure else "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_SYSTEM_WARNINGS": "False",
        "ANSIBLE_TIMEOUT": "15",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
    }


def prepare(private_dir: Path, rendered: Rendered, *, forks: int, insecure: bool) -> AnsibleJob:
    """Write inventory and extra vars (JSON) and return the job; runs nothing."""
    import json

    inv = write_atomic(private_dir / "inventory" / "hosts.json",
                       json.dumps(rendered.inventory, indent=2, sort_keys=True) + "\n")
    extra = write_atomic(private_dir / "env" / "extravars",
                         json.dumps(rendered.extravars, indent=2, sort_keys=True) + "\n")
    env = ansible_env(private_dir, insecure=insecure)
    for key in ("ANSIBLE_LOCAL_TEMP", "ANSIBLE_SSH_CONTROL_PATH_DIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return AnsibleJob(private_dir=private_dir, inventory=inv, extravars=extra, envvars=env,
                      forks=max(1, forks))


def run(job: AnsibleJob, sink: EventSink, tracker: StepTracker) -> int:
    """Run the playbook; feed every runner event to the tracker and the sink. Returns rc."""
    import ansible_runner

    def handler(raw: dict) -> bool:
        for ev in tracker.feed(raw):
            sink.emit(ev)
        return True

    saved = os.environ.get("PATH")
    os.environ["PATH"] = job.envvars["PATH"]  # ansible-runner looks ansible-playbook up here
    try:
        r = ansible_runner.run(
            private_data_dir=str(job.private_dir), project_dir=str(_playbooks()), playbook=PLAYBOOK,
            inventory=str(job.inventory), envvars=job.envvars, forks=job.forks,
            event_handler=handler, quiet=True, ident="provision",
            settings={"suppress_ansible_output": True, "suppress_output_file": False},
        )
    finally:
        if saved is not None:
            os.environ["PATH"] = saved
    if r.rc == 127 or (r.status == "failed" and not tracker.hosts):
        stdout = ""
        try:
            stdout = r.stdout.read()[-2000:]
        except Exception:  # noqa: BLE001
            pass
        raise EnvironmentProblem(f"ansible-playbook did not run (rc {r.rc}): {stdout.strip()[-400:]}",
                                 hint="check that ansible-core is installed in this Python's environment")
    return r.rc


def _playbooks() -> Path:
    """The playbooks folder; a clear error when envbuild runs outside a checkout."""
    if not (PLAYBOOKS / PLAYBOOK).is_file():
        raise EnvironmentProblem(
            f"the Ansible playbooks are not at {PLAYBOOKS}",
            hint="install envbuild from a checkout (pip install -e .) or set ENVBUILD_PLAYBOOKS "
                 "to the checkout's playbooks/ folder")
    return PLAYBOOKS
