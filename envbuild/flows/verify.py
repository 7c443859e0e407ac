"""The verify flow: a run's nodes observed again and compared with its lock and plans.

``verify_run(VerifyRequest(...)) -> VerifyOutcome``. The nodes are the request's selection
laid over the one the run recorded (``NodeSelection.over``): with no ``--hosts``,
``--inventory`` or ``--local`` the run's own nodes, reached with the run's key and known_hosts
files unless others are given. ``runners`` is shared with ``launch --submit``, which verifies
its provision run the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envbuild.connect.runners import LocalRunner, Runner, SshRunner
from envbuild.connect.selection import NodeSelection
from envbuild.errors import InputError
from envbuild.flows.nodes import NodesRequest
from envbuild.record import RunRecord
from envbuild.verify import NodeVerdict, exit_code, resolve_run, verify


@dataclass(frozen=True)
class VerifyRequest:
    """Which run (``run``, else the newest finished run of ``target``, else runs/latest), which
    nodes and how to reach them (``reach``: ``hosts``, ``inventory`` or ``local``, the SSH key,
    ``known_hosts`` files, ``insecure``; its selection laid over the run's own), and ``deep``
    (hash every installed file)."""

    run: Path | None = None
    target: str | None = None
    reach: NodesRequest = NodesRequest()
    deep: bool = False


@dataclass
class VerifyOutcome:
    run_dir: Path
    verdicts: list[NodeVerdict]

    @property
    def exit_code(self) -> int:
        """0 clean, 1 drift on some node, 3 a node could not be observed."""
        return exit_code(self.verdicts)

    def to_dict(self) -> dict:
        return {"run": str(self.run_dir), "exit_code": self.exit_code,
                "nodes": [v.to_dict() for v in self.verdicts]}


def runners(run_dir: Path, given: NodeSelection | None = None) -> list[Runner]:
    """One runner per node of ``run_dir``, chosen by ``given`` over the run's recorded
    selection: this machine for a local node, else SSH with the key and host-key files."""
    record = RunRecord.load(run_dir)  # a damaged run.json (its selection too) is bad input (exit 2), named
    if not any((n.path / "plan.json").is_file() for n in record.nodes()):
        raise InputError(f"run {run_dir.name} records no provisioned node (no nodes/*/plan.json): nothing to verify",
                         hint="pass the provision run: --run RUN_DIR (a launch run names it in launch.json)")
    selection = (given or NodeSelection()).over(record.selection)
    if not selection.given:
        raise InputError(f"run {run_dir.name} names no nodes to verify", hint="pass --hosts, --inventory or --local")
    return [LocalRunner(name=n.name) if n.is_local else SshRunner(n) for n in selection.nodes()]


def verify_run(request: VerifyRequest) -> VerifyOutcome:
    """Observe the run's nodes again (see the module docstring)."""
    selection = request.reach.selection()  # two node sources given is bad input before any run is looked for
    run_dir = resolve_run(request.run, request.target)
    return VerifyOutcome(run_dir, verify(run_dir, runners(run_dir, selection), deep=request.deep))
