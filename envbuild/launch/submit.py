"""Submit a rendered launch, follow the job, collect its output into a run directory.

The only module of ``envbuild.launch`` with side effects. Slurm: ``sbatch --parsable``, then
``scontrol show job -o ID`` until a terminal state (no squeue, no sacct; when the controller
has already forgotten the job, its line in the ``jobcomp/filetxt`` file); the job's ``--output``
and ``--error`` files lie in the run's ``job/`` folder (the folder must be shared with the
nodes, as a home directory is). local: the rendered script runs in the foreground.

The run directory (``envbuild.rundir``) gets ``job/`` (script, outputs), ``launch.json`` (job
id, scheduler state, exit code, output tail, the nodes the job ran on, what replaced the
training command, the verify verdicts), ``recipe.json`` and ``nodes/<node>/smoke.json`` in the
layout envbuild.report reads, under the node the job's script ran on (``job_node_dir``): the
recipe's native section parsed with its own parser (``envbuild.smoke.native``), or the
collective section when ``--smoke-only`` replaced the training command (the native section
then says it did not run, and why). When a provisioned run was verified first (the launch
flow, ``envbuild.flows.launch``), its lock, node records and node selection are copied in, so
the report judges the environment the job ran in and ``envbuild verify`` of the job's run
reaches its nodes as the provision did. ``runs/latest`` moves to the job's run only when the
job completed and its output gave a measurement (``evidence``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from envbuild.errors import EnvironmentProblem, InputError
from envbuild.launch import Rendered, render_job
from envbuild.launch.job import Job, LaunchOptions, build_job
from envbuild.launch.local import output_paths as local_output_paths
from envbuild.launch.slurm import output_paths as slurm_output_paths
from envbuild.record import RunRecord, RunWriter, SmokeRecord, create_run
from envbuild.record.verdict import FAIL, NOT_JUDGED, PASS, RunWord
from envbuild.smoke import read_result
from envbuild.smoke.hardware import node_gpus
from envbuild.smoke.logread import LogTooLarge, read_log
from envbuild.smoke.onnode import judged_section, section_head

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
TAIL_LINES = 20
NODE_FILES = ("facts.json", "preflight.json", "plan.json", "result.json", "observed.json")


@dataclass
class JobResult:
    """What the scheduler said about a finished job, and its output."""

    scheduler: str
    job_id: str
    state: str  # COMPLETED, FAILED, CANCELLED, TIMEOUT, ... (local: COMPLETED / FAILED)
    exit_code: str  # Slurm "rc:signal", local "rc"
    reason: str = ""
    first_node: str = ""  # the node the job's script ran on (Slurm's BatchHost; local: this machine)
    stdout_path: str = ""
    stderr_path: str = ""
    stdout: str = field(default="", repr=False)
    stderr: str = field(default="", repr=False)
    timings: dict[str, float] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)  # every node the job ran on (Slurm: its NodeList)
    unread: str = ""  # why the output was not read whole for judging (too large: stdout/stderr hold its tail)

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED"

    @property
    def rc(self) -> int:
        try:
            return int(self.exit_code.split(":")[0])
        except ValueError:
            return -1

    def tail(self, lines: int = TAIL_LINES) -> str:
        text = (self.stdout.rstrip() + "\n" + self.stderr.rstrip()).strip()
        return "\n".join(text.splitlines()[-lines:])

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("stdout"), d.pop("stderr"), d.pop("unread")  # unread: said in the native section's error
        d["tail"] = self.tail()
        return d


def parse_record(text: str) -> dict[str, str]:
    """``Key=value`` words of ``scontrol show job -o`` or a jobcomp/filetxt line; a value may
    hold spaces up to the next ``Key=``."""
    out: dict[str, str] = {}
    key = None
    for word in text.strip().split(" "):
        head = word.split("=", 1)[0]
        if "=" in word and head and head.replace("/", "").replace(":", "").replace("_", "").isalnum():
            key, out[head] = head, word.split("=", 1)[1]
        elif key is not None:
            out[key] += " " + word
    return out


def _run(argv: list[str], env: dict[str, str], cwd: str | Path | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EnvironmentProblem(f"{argv[0]} is not installed or not on PATH",
                                 hint="run envbuild launch --submit on a Slurm login node") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{' '.join(argv[:3])} did not answer within {timeout:.0f} s",
                                 hint="is slurmctld up? (scontrol ping)") from None


def submit_slurm(script: Path, env: dict[str, str], cwd: Path) -> str:
    """``sbatch --parsable SCRIPT``; the job id."""
    proc = _run(["sbatch", "--parsable", str(script)], env, cwd)
    if proc.returncode != 0:
        raise EnvironmentProblem(f"sbatch refused {script.name}: {proc.stderr.strip()[-400:]}",
                                 hint="check the partition, the node count and the GPUs asked for")
    return proc.stdout.strip().split(";")[0]


def jobcomp_record(job_id: str, env: dict[str, str]) -> dict[str, str]:
    """The job's line in the jobcomp/filetxt file, when the cluster keeps one we can read."""
    proc = _run(["scontrol", "show", "config"], env)
    conf = {}
    for line in proc.stdout.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            conf[k.strip()] = v.strip()
    path = conf.get("JobCompLoc")
    if conf.get("JobCompType") != "jobcomp/filetxt" or not path or not os.access(path, os.R_OK):
        return {}
    for line in reversed(Path(path).read_text(errors="replace").splitlines()):
        rec = parse_record(line)
        if rec.get("JobId") == job_id:
            return rec
    return {}


def follow_slurm(job_id: str, env: dict[str, str], timeout: float) -> dict[str, str]:
    """Poll ``scontrol show job`` until the job ends; on ``timeout`` cancel it (``scancel``)
    and return its last record with ``JobState=CANCELLED`` and why."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    rec: dict[str, str] = {}
    while True:
        proc = _run(["scontrol", "show", "job", "-o", job_id], env)
        if proc.returncode == 0 and proc.stdout.strip():
            rec = parse_record(proc.stdout)
        elif "Invalid job id" in proc.stderr:
            done = jobcomp_record(job_id, env)
            if done:
                return done
            return {**rec, "JobState": rec.get("JobState", "UNKNOWN"),
                    "Reason": "the controller forgot the job and keeps no readable jobcomp file"}
        if rec.get("JobState", "").split(" ")[0] in TERMINAL:
            return rec
        if time.monotonic() > deadline:
            _run(["scancel", job_id], env)
            return {**rec, "JobState": "CANCELLED",
                    "Reason": f"envbuild cancelled it after {timeout:.0f} s in state {rec.get('JobState')}"}
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


TAIL_BYTES = 64 * 1024  # of an output too large to judge, what is kept to show its end


def _read(path: Path) -> tuple[str, str]:
    """(the job's output file as the judge reads it, ``envbuild.smoke.logread``: streamed, lines
    cut, the text held bounded; "" why not). An output that holds more than the bound gives
    its last ``TAIL_BYTES`` and the reason; a missing one gives ""."""
    try:
        return read_log(path, what="job output").text, ""
    except LogTooLarge as exc:
        with path.open("rb") as fh:
            fh.seek(max(fh.seek(0, os.SEEK_END) - TAIL_BYTES, 0))
            return fh.read().decode("utf-8", errors="replace"), exc.message
    except InputError:
        return "", ""


def run_slurm(job: Job, script: Path, env: dict[str, str], timeout: float) -> JobResult:
    t0 = time.monotonic()
    job_id = submit_slurm(script, env, script.parent)
    t1 = time.monotonic()
    rec = follow_slurm(job_id, env, timeout)
    t2 = time.monotonic()
    out, err = (Path(p) if os.path.isabs(p) else script.parent / p for p in slurm_output_paths(job, job_id))
    nodes = node_names(rec.get("NodeList", ""), env)
    first = rec.get("BatchHost") or (nodes[0] if nodes else "")
    (stdout, why_out), (stderr, why_err) = _read(out), _read(err)
    result = JobResult("slurm", job_id, rec.get("JobState", "UNKNOWN").split(" ")[0],
                       rec.get("ExitCode", "?"), rec.get("Reason", ""), first or "unknown",
                       str(out), str(err), stdout, stderr, nodes=nodes or ([first] if first else []),
                       unread="; ".join(w for w in (why_out, why_err) if w))
    result.timings = {"submit_s": t1 - t0, "run_s": t2 - t1, "collect_s": time.monotonic() - t2}
    return result


def run_local(job: Job, script: Path, env: dict[str, str], timeout: float) -> JobResult:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(["bash", str(script)], env=env, cwd=script.parent, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        state, code = ("COMPLETED" if proc.returncode == 0 else "FAILED"), str(proc.returncode)
        reason = proc.stderr.strip()[-300:] if proc.returncode and not proc.stdout else ""
    except subprocess.TimeoutExpired:
        state, code, reason = "TIMEOUT", "124", f"envbuild stopped it after {timeout:.0f} s"
    out, err, _ = (Path(p) if os.path.isabs(p) else script.parent / p for p in local_output_paths(job))
    here = socket.gethostname()
    (stdout, why_out), (stderr, why_err) = _read(out), _read(err)
    return JobResult("local", "local", state, code, reason, here, str(out), str(err), stdout, stderr,
                     timings={"run_s": time.monotonic() - t0}, nodes=[here],
                     unread="; ".join(w for w in (why_out, why_err) if w))


def node_names(nodelist: str, env: dict[str, str]) -> list[str]:
    """Slurm's NodeList (``node[1-2]``) as node names, expanded by ``scontrol show hostnames``;
    [] when there is none (a job that never started)."""
    if not nodelist or nodelist in ("(null)", "None assigned"):
        return []
    proc = _run(["scontrol", "show", "hostnames", nodelist], env)
    names = proc.stdout.split() if proc.returncode == 0 else []
    return names or [nodelist]


def results(job: Job, recipe, result: JobResult, gpu: str | None = None, gpus: int | None = None) -> dict[str, Any]:
    """smoke.json for the job: the section(s) its output gives, the native one judged by
    ``envbuild.smoke.judge`` for the job node's GPU (``gpu``, ``gpus``: its facts, where a
    provisioned run's node records were copied in).

    A job that did not complete gets its scheduler state, exit code and output tail in the
    section, with ``error`` set, so the report names it as not ok."""
    job_info = {"scheduler": result.scheduler, "id": result.job_id, "state": result.state,
                "exit_code": result.exit_code}
    out: dict[str, Any] = {}
    text = result.stdout + "\n" + result.stderr
    if job.options is not None and job.options.smoke_only:
        out["collective"] = read_result("collective", 0 if result.ok else max(result.rc, 1),
                                        result.stdout, result.stderr)
        out["collective"]["job"] = job_info
        if result.unread:  # read from the output's tail only: not a result to trust
            out["collective"]["error"] = f"the job's output was not read whole: {result.unread}"
        native = {**(section_head(recipe.benchmark) if recipe.benchmark else {}), "ran": False, "reason": job.replaced}
    elif recipe.benchmark is None:
        native = {"ran": False, "reason": "the recipe declares no benchmark"}
    elif result.unread:  # fail closed: an output the judge does not hold whole is not judged
        native = {**section_head(recipe.benchmark), "ran": True, "source": "job", "rc": result.rc,
                  "error": f"the job's output was not judged: {result.unread}", "tail": result.tail()}
    else:
        native = judged_section(recipe.name, recipe.benchmark, text, source="job", rc=result.rc,
                                job_state=result.state, gpu=gpu, gpus=gpus, record="job output")
        if job.replaced:
            native["replaced"] = job.replaced
        else:  # the recipe's own training ran: it exercised the environment when it completed
            native["ok"] = result.ok and ((native.get("verdict") or {}).get("completion") or {}).get("state") == "complete"
    native["job"] = job_info
    if not result.ok:
        why = f"job {result.job_id} {result.state} (exit {result.exit_code})" + (f": {result.reason}" if result.reason else "")
        native["error"] = why
        native["tail"] = result.tail()
        if "collective" in out:
            out["collective"]["error"] = why
    out["native"] = native
    return out


@dataclass
class Outcome:
    """A submitted job's run directory: ``node_dir`` is the folder under ``nodes/`` holding the
    job's results (the provisioned node it ran on, else its first node's name); ``hosts`` the
    nodes the job ran on, as the scheduler names them."""

    run_dir: Path
    rendered: Rendered
    result: JobResult
    smoke: SmokeRecord  # the job node's smoke.json, as written
    node_dir: str
    published: bool = False  # runs/latest moved to this run (a completed job with evidence)

    @property
    def hosts(self) -> list[str]:
        return self.result.nodes or ([self.result.first_node] if self.result.first_node else [])

    @property
    def node(self) -> str:
        """The node the job's script ran on (Slurm's batch host), by its own name."""
        return self.result.first_node or self.node_dir

    @property
    def status(self) -> RunWord:
        """``PASS``, ``NOT JUDGED`` (the run completed; nothing to judge it by) or ``FAIL`` (the
        job failed, a section holds an error or is not ok, or the judge's word is FAIL or
        NOTHING FOUND): launch.json's ``status``."""
        if not self.result.ok:
            return FAIL
        if any(s.error is not None or s.ok is False for s in self.smoke.sections().values()):
            return FAIL
        native = self.smoke.native
        if native is None or not native.ran:  # a smoke-only job, or no benchmark: what ran held, nothing was judged
            return NOT_JUDGED
        word = native.verdict.verdict if native.verdict is not None else None
        return PASS if word == PASS else NOT_JUDGED if word == NOT_JUDGED else FAIL

    @property
    def passed(self) -> bool | None:
        """True PASS, False FAIL, None NOT JUDGED (launch.json's ``passed``)."""
        return {PASS: True, FAIL: False}.get(self.status)


def evidence(result: JobResult, smoke: SmokeRecord) -> bool:
    """Whether a job carries evidence: it completed, and its output gave a measurement (the
    recipe's benchmark parsed into metrics, or the smoke's all-reduce ok). Only such a run
    becomes ``runs/latest``."""
    if not result.ok:
        return False
    native, collective = smoke.native, smoke.collective
    return bool(native is not None and native.ran and native.metrics) or (collective is not None and collective.ok is True)


def launch(recipe, target, plan, options: LaunchOptions, *, argv: list[str],
           env: dict[str, str] | None = None, timeout: float = 3600,
           provisioned: Path | None = None, verdicts: list | None = None) -> Outcome:
    """Render for a job folder in a new run directory, submit, follow, collect, write the
    results where envbuild.report reads them. ``provisioned``: the verified provision run
    whose lock, node records and node selection are copied in (``verdicts``: what verify
    said). ``runs/latest`` moves to the new run only when the job carries evidence."""
    if options.scheduler not in ("slurm", "local"):
        raise EnvironmentProblem(f"--submit runs Slurm and local jobs; {options.scheduler} is render-only here",
                                 hint="submit the rendered file yourself (qsub / kubectl apply -f)")
    writer = create_run(recipe.name, target.name, argv=argv, hosts=[], options={
        "launch": {k: v for k, v in asdict(options).items() if v not in (None, "", False)}})
    rd = writer.rd
    job_dir = rd.path / "job"
    job_dir.mkdir(mode=0o700)
    job = build_job(recipe, target, plan, replace(options, output_dir=str(job_dir)))
    rendered = render_job(job)
    script = job_dir / rendered.filename
    script.write_text(rendered.text)
    rd.write("recipe.json", recipe.model_dump(mode="json"))
    if provisioned is not None:
        _copy_provisioned(provisioned, rd)
    run_env = {**os.environ, **(env or {})}
    runner = run_slurm if options.scheduler == "slurm" else run_local
    result = runner(job, script, run_env, timeout)
    t0 = time.monotonic()
    folder = job_node_dir(rd.path, result)
    node = RunRecord.load(rd.path).node(folder)  # the job node's facts, where a provision run was copied in
    facts = node.facts if node is not None else None
    gpu, gpus = node_gpus(facts.model_dump(mode="json") if facts is not None else None)
    smoke = writer.node_smoke(folder, results(job, recipe, result, gpu, gpus))  # validated: the typed record
    result.timings["parse_s"] = time.monotonic() - t0
    outcome = Outcome(rd.path, rendered, result, smoke, folder, published=evidence(result, smoke))
    writer.launch({"schema": "envbuild.launch/1", "scheduler": options.scheduler,
                             "script": str(script), "job": result.to_dict(), "replaced": job.replaced,
                             "node": outcome.node, "nodes": outcome.hosts, "node_dir": folder,
                             "passed": outcome.passed, "status": outcome.status,
                             "provisioned_run": str(provisioned) if provisioned else None,
                             "packed": ({"sha256": job.packed.sha256, "bytes": job.packed.bytes,
                                         "prefix": job.packed.prefix, "format": job.packed.format}
                                        if job.packed else None),
                             "verified": [v.to_dict() for v in verdicts or []]})
    writer.finish("ok" if result.ok else "failed", hosts=outcome.hosts,
                  job={"id": result.job_id, "state": result.state, "exit_code": result.exit_code})
    if outcome.published:
        rd.publish()
    return outcome


def job_node_dir(run_dir: Path, result: JobResult) -> str:
    """The folder under ``nodes/`` the job's results go to: the provisioned node the job's
    script ran on (matched by its folder name or the host its facts name; the controller's
    ``local`` node for a job run here), else the job's first node by its own name."""
    here = result.first_node or "job"
    for node in RunRecord.load(run_dir).nodes():
        facts = node.facts
        names = {node.host, facts.host if facts is not None else None}
        if node.host == "local" and result.scheduler == "local":
            names.add(here)  # the controller, which provision calls local
        if here in names:
            return node.host
    return here


def _copy_provisioned(src: Path, rd) -> None:
    if (src / "lock.lock").exists():
        shutil.copy2(src / "lock.lock", rd.path / "lock.lock")
    record = RunRecord.load(src)
    chosen = record.selection  # read once, typed; a run that recorded none: its options (record.migrate)
    RunWriter(rd).update(lock_digest=record.run.lock_digest, lock_path=record.run.lock_path, provisioned_run=str(src),
                         selection=chosen.record() if chosen else None)
    for node in sorted(p for p in (src / "nodes").glob("*") if p.is_dir()):
        for name in NODE_FILES:
            if (node / name).exists():
                shutil.copy2(node / name, rd.node(node.name) / name)
