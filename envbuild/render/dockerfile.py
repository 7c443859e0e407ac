"""Plan + actions -> a Docker/OCI build context. Pure: returns a ``Context``.

    Dockerfile          one block per plan step (its id and reason as comments)
    envbuild.lock       the lock the image was built from (copied into the image)
    files/<abs path>    the files the steps write (requirements with hashes, env.sh)
    envbuild/...        envbuild's shipped files: the node tool and its action files, smoke
                        scripts, verify.sh, verify_image.py, verify.json
    wheelhouse/         locked wheels from a wheelhouse (only when rendered with one)

Layers are ordered for the cache: base tooling and the venv first, then each install step
with its own requirements file COPY'd right before its pip RUN, so a change of one locked
package rebuilds that step's layers and the later ones only; the lock, the verify files, the
environment variables and the labels (lock digest) come last.

Multi-stage when the plan builds extension wheels (Apex): the ``env`` stage holds the base
tooling and the pip installs, ``devel`` (from ``env``) checks out and patches the extension's
tree and builds its wheel with the plan's ``TORCH_CUDA_ARCH_LIST``, ``runtime`` (from
``env``) copies the wheel (``COPY --from=devel``) and installs it. Build parallelism
(``MAX_JOBS``) is a build argument declared right before the RUN that reads it: unset, the
build machine's cores, at most the planned value; ``--build-arg MAX_JOBS=N`` sets it.

The steps run as root; the image runs as ``envbuild`` (uid 10001, ``USER 10001:10001``),
which owns only what a run writes: the smoke's folder and the source trees in the image
(Megatron compiles its dataset helpers into its tree at first use). The environment stays as
built: drift needs root (``docker run --user 0``).

Every RUN body comes from ``envbuild.render.shell``; no install syntax is written here.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

from envbuild.actions.model import BuildWheel, CopyAsset, GitCheckout, MakeDir, WriteFile
from envbuild.render.context import Context
from envbuild.render.regenerate import render_command
from envbuild.plan.image import PREPARE, WHEELHOUSE, run_time_note
from envbuild.plan.params import (ApexBuildParams, DataParams, GitSourceParams, ImagePlan, InstallSourceParams,
                                  PatchParams, PipInstallParams, PipToolingParams)
from envbuild.render.image import (build_steps, devel_dests, prepare_sh, run_time_steps, verify_files,
                                   verify_sh, verify_spec, where)
from envbuild.render.shell import CAPPED_BY_CORES, build_arg_check, commands, copied, q, shipped

JOIN = " && \\\n    "
PIP_STEPS = (PipToolingParams, PipInstallParams, InstallSourceParams, ApexBuildParams)  # steps that run pip
PIP_CACHE = "/root/.cache/pip"
IGNORE_APT = ("# hadolint ignore=DL3008,DL3009 # reason: the published apt package names, "
              "unpinned (one version per distribution release); the lists are removed below")
RUN_USER, RUN_UID = "envbuild", 10001  # above the ranges distributions give (ubuntu's own user is 1000)
IGNORE_CD = ("# hadolint ignore=DL3003 # reason: an action runs in its own folder in a "
             "subshell; WORKDIR would carry over to every later instruction")


def dq(value: str) -> str:
    """A double-quoted Dockerfile word: no variable expansion, backslash-escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("\n", "\\n") + '"'


def _comment(text: str, prefix: str = "# ") -> list[str]:
    return [prefix + line for line in textwrap.wrap(" ".join(text.split()), 96)] or [prefix.rstrip()]


def _ctx_path(path: str) -> str:
    return "files/" + path.lstrip("/")


class _Writer:
    def __init__(self, ip: ImagePlan):
        self.ip = ip
        self.lines: list[str] = []
        self.files: dict[str, str] = {}
        self.copies: dict[str, Path] = {}
        # build parallelism is a build argument: the build machine sizes it (envbuild.render.shell)
        self.where = replace(where(ip), build_args=CAPPED_BY_CORES)
        self.declared: set[str] = set()  # build arguments declared in the current stage
        self.in_stage: set[str] = set()  # shipped files copied into the current stage (the node tool: once)

    def ship(self, rel: str, item) -> str:
        """Put one shipped file in the context under envbuild/; its context path."""
        ctx = "envbuild/" + rel
        if isinstance(item, Path):
            self.copies[ctx] = item
        else:
            self.files[ctx] = item
        return ctx

    def run(self, acts: list, wheelhouse: bool, pip_cache: bool = False) -> None:
        cmds = commands(acts, self.where)
        if any("\n" in c for c in cmds):  # pragma: no cover - heredocs are COPY'd, never RUN
            raise ValueError("a RUN body cannot hold a heredoc")
        # the build arguments these actions read: a capped variable in an action's environment
        # (envbuild.render.shell.env_words renders it as "${K:-capped}"), not found in the text
        args = sorted({k for a in acts for k, v in (getattr(a, "env", None) or {}).items()
                       if k in CAPPED_BY_CORES and str(v).isdigit()})
        for k in args:
            if k not in self.declared:  # declared right before its first use: earlier layers stay cached
                self.declared.add(k)
                self.lines += _comment(
                    f"{k}: build parallelism, sized on the build machine when the image is built: "
                    f"unset or empty, its cores ($(nproc)), at most the value planned for "
                    f"{self.ip.target}'s cores and memory (the number in the RUN below); "
                    f"--build-arg {k}=N sets it (a value above the planned one risks running out of "
                    f"memory)") + [f"ARG {k}="]
        cmds = [build_arg_check(k) for k in args] + cmds
        if any(c.startswith("apt-get install") or " apt-get install" in c for c in cmds):
            cmds.append("rm -rf /var/lib/apt/lists/*")
            self.lines.append(IGNORE_APT)
        elif any(c.startswith("(cd ") for c in cmds):
            self.lines.append(IGNORE_CD)
        mount = f"--mount=type=bind,source=wheelhouse,target={WHEELHOUSE} " if wheelhouse else ""
        if pip_cache:  # downloads survive a rebuild after a lock change, and stay out of the layer
            mount += f"--mount=type=cache,id=envbuild-pip,target={PIP_CACHE} "
        self.lines.append(f"RUN {mount}" + JOIN.join(cmds))

    def step(self, step, acts: list, *, devel_wheels: bool = False) -> None:
        self.lines += ["", f"# step {step.id}: {step.title}"] + _comment(step.reason, "# why: ")
        pending: list = []
        uses_wheelhouse = any(WHEELHOUSE in " ".join(getattr(a, "argv", [])) for a in acts)
        pip_cache = isinstance(step.params, PIP_STEPS)

        def flush() -> None:
            if pending:
                self.run(list(pending), uses_wheelhouse, pip_cache)
                pending.clear()

        for a in acts:
            if isinstance(a, WriteFile):
                flush()
                self.files[_ctx_path(a.path)] = a.content
                chmod = f"--chmod={a.perm} " if a.perm != "0644" else ""
                self.lines.append(f"COPY {chmod}{_ctx_path(a.path)} {a.path}")
            elif isinstance(a, CopyAsset):
                flush()
                rel = self.ship(*next(iter(shipped([a]).items())))
                chmod = f"--chmod={a.perm} " if a.perm != "0644" else ""
                self.lines.append(f"COPY {chmod}{rel} {a.dest}")
            elif isinstance(a, BuildWheel) and devel_wheels:
                flush()
                self.lines.append(f"COPY --from=devel {a.outdir} {a.outdir}")
            else:
                items = shipped([a])  # the node tool and the action's file
                for rel, item in items.items():
                    self.ship(rel, item)
                for rel in [r for r in copied(items) if r not in self.in_stage]:
                    self.in_stage.add(rel)
                    flush()
                    self.lines.append(f"COPY envbuild/{rel} {self.ip.files_dir}/{rel}")
                pending.append(a)
        flush()

    def stage_args(self) -> None:
        self.declared, self.in_stage = set(), set()  # an ARG holds in the stage that declares it
        self.lines += ["# PIP_CERT: a CA bundle for pip behind a TLS-inspecting proxy "
                       "(--build-arg PIP_CERT=PATH with the bundle mounted); unset otherwise",
                       "ARG PIP_CERT"]


def render(ip: ImagePlan, regenerate: str | None = None) -> Context:
    """The build context of ``ip`` (``envbuild.render.image.image_plan``). ``regenerate``: the
    command its header names (default: the recipe and target by name, ``envbuild.render.regenerate``)."""
    w = _Writer(ip)
    plan = ip.plan
    steps = build_steps(ip, run_time_data=True)
    run_time = run_time_steps(ip)  # data without a recorded sha256: prepare.sh, not a layer
    devel = devel_dests(ip)
    devel_ids = {s.id for s, acts in steps
                 if any(isinstance(a, GitCheckout) and a.dest in devel for a in acts)
                 or (isinstance(s.params, PatchParams) and s.params.dest in devel)}
    first_src = next((i for i, (s, _) in enumerate(steps) if isinstance(s.params, GitSourceParams)), len(steps))
    env_part, rest = steps[:first_src], steps[first_src:]

    w.lines += ["# hadolint global ignore=DL3059 # reason: one RUN per plan step, so that a changed "
                "step rebuilds from its own layer on",
                f"# Image of {ip.recipe} for {ip.target}, rendered by envbuild from the plan",
                f"# (lock digest {plan.lock_digest or 'none: no lockfile, versions from the recipe'}).",
                f"# Regenerate: {regenerate or render_command(ip.recipe, ip.target, 'dockerfile')}",
                "# Build:      docker build -t IMAGE .     (podman build: add --format docker)",
                # a GPU target's smoke trains on its GPUs (envbuild.plan.smoke): the container needs them
                "# Verify:     docker run --rm" + (" --gpus all" if ip.gpus else "") + " IMAGE sh "
                + f"{ip.files_dir}/verify.sh --smoke",
                *_comment(f"base: {ip.base.image}: {ip.base.why} ({ip.base.source})", "# ")]
    for note in ip.notes + ([run_time_note(ip)] if run_time else []):
        w.lines += _comment(note, "# note: ")
    if not ip.feasible:
        w.lines += _comment("PREFLIGHT REFUSED THIS TARGET: " + plan.steps[0].params.summary
                            + "; the first RUN stops the build", "# ")
    w.lines += ["", f"FROM {ip.base.image}" + (" AS env" if devel else "")]
    w.stage_args()
    for step, acts in env_part:
        w.step(step, acts)
    if devel:
        w.lines += ["", "# ---- devel: build the extension wheels", "FROM env AS devel"]
        w.stage_args()
        for step, acts in rest:
            if step.id in devel_ids:
                w.step(step, acts)
            elif any(isinstance(a, BuildWheel) for a in acts):
                w.step(step, [a for a in acts if isinstance(a, BuildWheel)])
        w.lines += ["", "# ---- runtime: the environment, with the wheels built in devel", "FROM env AS runtime"]
        w.stage_args()
    for step, acts in rest:
        if step.id not in devel_ids:
            w.step(step, acts, devel_wheels=bool(devel))

    # the run stage's user: not root. The steps above ran as root; what a run writes (the
    # smoke's folder, the source trees whose helpers compile at first use) belongs to it.
    owned = [f"{ip.state}/smoke", *sorted(verify_spec(ip)["sources"])]  # the trees the run stage has
    # prepare.sh writes its record folder and its copy of the fetch tool, as the run stage's user
    owned += sorted({a.path if isinstance(a, MakeDir) else str(Path(a.dest).parent)
                     for _, acts in run_time for a in acts if isinstance(a, (MakeDir, CopyAsset))} - set(owned))
    w.lines += ["", f"# the run stage's user: {RUN_USER} (uid {RUN_UID}); the smoke's folder and the source trees "
                    "are its own",
                f"RUN useradd --uid {RUN_UID} --user-group --create-home --shell /bin/sh {RUN_USER} && \\",
                "    mkdir -p " + " ".join(q(o) for o in owned) + " && \\",
                f"    chown -R {RUN_USER}:{RUN_USER} " + " ".join(q(o) for o in owned)]

    # verify files, lock, environment, labels: last, so that none of them invalidates a layer
    w.lines += ["", "# verify.sh [--smoke] checks the image against the lock (imports, versions, "
                    "source trees)"]
    for rel, item in sorted(verify_files(ip).items()):
        w.ship(rel, item)
    w.files["envbuild/verify.sh"] = verify_sh(ip, q(ip.files_dir))
    modes = {"envbuild/verify.sh": 0o755}
    if run_time:
        w.lines += _comment(f"{PREPARE} fetches the data files the image does not hold (no sha256 in the recipe: "
                            + ", ".join(f.name for s, _ in run_time if isinstance(s.params, DataParams)
                                        for f in s.params.files)
                            + ") and runs the steps that read them, when a container starts: "
                            f"docker run IMAGE sh -c 'sh {ip.files_dir}/{PREPARE} && exec COMMAND'")
        for _, acts in run_time:
            for rel, item in shipped(acts).items():
                w.ship(rel, item)
        w.files[f"envbuild/{PREPARE}"] = prepare_sh(ip, q(ip.files_dir))
        modes[f"envbuild/{PREPARE}"] = 0o755
    w.lines.append(f"COPY envbuild/ {ip.files_dir}/")
    if ip.lock_text is not None:
        w.files["envbuild.lock"] = ip.lock_text
        w.lines.append(f"COPY envbuild.lock {ip.state}/envbuild.lock")
    env = {"VIRTUAL_ENV": ip.prefix, "PATH": f"{ip.prefix}/bin:$PATH"}
    ef = ip.env_file()
    host = ip.host_env
    env.update({k: v for k, v in (ef.vars if ef else {}).items() if k not in host})
    if host:  # the node's settings, given at run time: `docker run --env-file host.env` (values verbatim)
        w.files["host.env"] = "".join(f"{k}={v}\n" for k, v in host.items())
        w.lines += _comment(f"{ip.target}'s own settings ({', '.join(host)}) are the node's, not the "
                            f"image's: on such a node, docker run --env-file host.env (this folder's)")
    w.lines += ["ENV " + " \\\n    ".join(f"{k}={dq(v) if k != 'PATH' else dq(ip.prefix + '/bin') + ':$PATH'}"
                                           for k, v in env.items())]
    w.lines += ["LABEL " + " \\\n      ".join(f"{k}={dq(v)}" for k, v in ip.labels.items())]
    w.lines += [f"USER {RUN_UID}:{RUN_UID}", f"WORKDIR /home/{RUN_USER}"]  # numeric: no passwd lookup on the host
    w.lines += [f"CMD [\"sh\", \"{ip.files_dir}/verify.sh\"]"]
    w.files["Dockerfile"] = "\n".join(w.lines) + "\n"
    return Context(files=w.files, copies=w.copies, modes=modes, wheels=list(ip.wheelhouse))
