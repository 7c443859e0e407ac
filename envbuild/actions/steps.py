"""Plan step -> primitive actions: the one place that knows pip, venv, conda and git syntax.

``actions(step, prefix)`` is pure. Every renderer calls it; none spells an install command.

    >>> from envbuild.plan.model import Step
    >>> from envbuild.plan.params import ImportCheckParams
    >>> step = Step(id="import-check", title="Import check", params=ImportCheckParams(modules=["json"]))
    >>> [a.op for a in actions(step, "/opt/env")]
    ['run']
"""

from __future__ import annotations

import json
import shlex

from envbuild.actions.model import (Action, ApplyPatch, BuildWheel, Capture, CopyAsset,
                                    GitCheckout, MakeDir, Run, StageDir, WriteFile)
from envbuild.names import ENV_NAME_RE
from envbuild.plan import params as P

PIP = ["-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
# a repair run (the step's effect did not hold, see envbuild.actions.effects): pip says
# "already satisfied" when a distribution's metadata is there and its files are not
PIP_REPAIR = ["--force-reinstall"]
IMPORT_CODE = ("import importlib, sys\n"
               "for m in sys.argv[1:]:\n"
               "    mod = importlib.import_module(m)\n"
               "    print(m, getattr(mod, '__version__', ''))")


# uv pip install: the same requirement files, hashes and index options as pip, into the same
# environment (--python). Files are copied from uv's cache (--link-mode copy), never hard-linked:
# with links, an in-place edit in one environment changes the cache and every environment on
# the machine made from it (copying torch takes ~12 s against 0.7 s for links, the price of
# environments that are their own). A repair (the step's effect did not hold: a file differs
# from its RECORD) reinstalls without the cache, from the wheel itself.
UV_PIP = ["pip", "install", "--no-progress", "--link-mode", "copy"]
UV_REPAIR = ["--reinstall", "--no-cache"]
# What the node's pip is configured with through its environment, for uv (which reads none of
# PIP_*): the CA bundle pip trusts (PIP_CERT, else what requests reads; a TLS-inspecting proxy's
# CA), the index and find-links it uses, its timeout. A variable uv's own name already sets is
# left alone, and an option on the command line wins over both, as with pip. pip.conf files are
# not read (see envbuild.plan.installer).
UV_ENV_FROM_PIP = {
    "SSL_CERT_FILE": ["PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"],
    "UV_INDEX_URL": ["PIP_INDEX_URL"],
    "UV_EXTRA_INDEX_URL": ["PIP_EXTRA_INDEX_URL"],
    "UV_FIND_LINKS": ["PIP_FIND_LINKS"],
    "UV_HTTP_TIMEOUT": ["PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT"],
}


def install_argv(prefix: str, installer: str = "pip", uv: str | None = None) -> list[str]:
    """The install command of a package step: ``<env python> -m pip install ...`` or
    ``<uv> pip install --python <env python> ...``."""
    if installer == "uv":
        if not uv:
            raise ValueError("a uv install step needs the uv binary's path on the node")
        return [uv, *UV_PIP, "--python", python_of(prefix)]
    return [python_of(prefix), *PIP]


def repair_args(installer: str = "pip") -> list[str]:
    return list(UV_REPAIR if installer == "uv" else PIP_REPAIR)


def env_from(installer: str = "pip") -> dict[str, list[str]]:
    return {k: list(v) for k, v in UV_ENV_FROM_PIP.items()} if installer == "uv" else {}


def log_path(prefix: str, step_id: str) -> str:
    """The node file a step's commands write their output to as they run (its build log)."""
    return f"{state_dir(prefix)}/logs/{step_id.replace(':', '-')}.log"


def python_of(prefix: str) -> str:
    return f"{prefix.rstrip('/')}/bin/python"


def state_dir(prefix: str) -> str:
    return f"{prefix.rstrip('/')}/.envbuild"


def actions(step, prefix: str) -> list[Action]:
    """The actions of one plan step (``envbuild.plan.model.Step``)."""
    p = step.params
    fn = _BY_KIND[p.kind]
    return fn(step, p, prefix)


def _preflight(step, p: P.PreflightParams, prefix: str) -> list[Action]:
    # The controller refused infeasible nodes before any action; a plan that carries an
    # infeasible verdict still fails here, on the node, before anything is installed.
    if p.feasible:
        return []
    return [Run(argv=["sh", "-c", 'echo "preflight refused this node: $1" >&2; exit 1', "sh",
                      p.summary or "infeasible"], changes=False)]


def _system_packages(step, p: P.SystemPackagesParams, prefix: str) -> list[Action]:
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    return [Run(argv=["apt-get", "update", "-q"], env=env),
            Run(argv=["apt-get", "install", "-y", "-q", "--no-install-recommends", *p.packages], env=env)]


# --system-site-packages over an interpreter that is itself a venv's (the node's own torch venv,
# /opt/torch/.venv on the H100 node) gives the base interpreter's site-packages, not that venv's:
# a .pth in the new venv adds the interpreter's own site-packages after the venv's (as a
# Polaris venv sees the conda module's packages), through site.addsitedir so that the base's
# own .pth files run too, as a system site's do (setuptools' distutils shim on Python 3.12, which
# DeepSpeed's import needs: the CPU import proof of h100-megatron-deepspeed failed without it;
# editable installs of the base venv). One line, run by that interpreter: it writes
# the .pth only when it is a venv's (sys.prefix != sys.base_prefix). Planned only for an
# interpreter outside the system prefixes (/usr, /bin), where no venv lives.
BASE_SITE_PTH = ("import pathlib, sys, sysconfig; p = pathlib.Path(sys.argv[1], 'lib', 'python%d.%d' % "
                 "sys.version_info[:2], 'site-packages', '_envbuild_base_site.pth'); "
                 "p.write_text('import site; site.addsitedir(%r)' % sysconfig.get_paths()['purelib'] + chr(10)) "
                 "if sys.prefix != sys.base_prefix "
                 "else p.unlink(missing_ok=True)")
SYSTEM_PREFIXES = ("/usr/", "/bin/")


# A venv is made again over its own folder: its interpreter links and pyvenv.cfg go first, so that
# `python -m venv` makes them anew (it leaves an existing link alone, wherever it points, and a
# wrapper script in bin/python would keep the environment outside the prefix); the packages stay.
# Then every .pth file in the venv's purelib that no installed distribution's RECORD lists and
# that is not envbuild's own is removed (a .pth runs at every start of the interpreter). The same
# rule as the node-side check (envbuild.node.effects.foreign_pth); tests keep them equal.
PRUNE_PTH = ("import csv, pathlib, sysconfig; s = pathlib.Path(sysconfig.get_paths()['purelib']); "
             "own = {r[0] for f in s.glob('*.dist-info/RECORD') for r in csv.reader(f.open(newline='')) if r}; "
             "own |= {'easy-install.pth'} if any(s.glob('*.egg-link')) else set(); "
             "[print('envbuild: removed', p, '(a .pth no installed package owns)') or p.unlink() "
             "for p in sorted(s.glob('*.pth')) if p.name not in own and not p.name.startswith(('envbuild-', '_envbuild_'))]")


def venv_links(prefix: str, python: str) -> list[str]:
    """The files ``python -m venv`` makes that say whose environment it is."""
    root = prefix.rstrip("/")
    return [f"{root}/pyvenv.cfg", f"{root}/bin/python", f"{root}/bin/python3", f"{root}/bin/python{python}"]


def venv_argv(interpreter: str, prefix: str, system_site_packages: bool, with_pip: bool = True) -> list[str]:
    return [interpreter, "-m", "venv", *(["--system-site-packages"] if system_site_packages else []),
            *([] if with_pip else ["--without-pip"]), prefix]


# After `module load`, the module's own `python3` (first on PATH) makes the venv, as the site's
# instructions do (ALCF: module load conda/...; python3 -m venv --system-site-packages ...), not
# an interpreter found before the module was loaded: that one would not see the module's torch
# and DeepSpeed. It refuses when the module's Python is not the recipe's version.
MODULE_VENV = ('import sys, venv; want = sys.argv[1]; have = "%d.%d" % sys.version_info[:2]; '
               'sys.exit("envbuild: the module python3 (" + sys.executable + ") is Python " + have + ", '
               'the recipe asks for " + want) if have != want else venv.main(sys.argv[2:])')


def module_venv_argv(module: str, python: str, prefix: str, system_site_packages: bool,
                     with_pip: bool = True) -> list[str]:
    """``module load MODULE``, then its ``python3`` makes the venv (module and paths stay argv words)."""
    return ["bash", "-c", 'module load "$1" && shift && exec "$@"', "bash", module, "python3", "-c",
            MODULE_VENV, python, *venv_argv("python3", prefix, system_site_packages, with_pip)[3:]]


def _environment(step, p: P.EnvironmentParams, prefix: str) -> list[Action]:
    out: list[Action] = [MakeDir(path=f"{state_dir(p.prefix)}/state")]
    venv = venv_argv(p.interpreter, p.prefix, p.system_site_packages, p.with_pip)
    if p.backend in ("venv", "module-venv", "container"):  # container: a venv over the image's python
        out.append(Run(argv=["rm", "-f", *venv_links(p.prefix, p.python)]))
        if p.conda_module:  # the module's python3: load it, then make the venv (argv as data)
            out.append(Run(argv=module_venv_argv(p.conda_module, p.python, p.prefix,
                                                 p.system_site_packages, p.with_pip)))
        else:
            out.append(Run(argv=venv))
            if p.system_site_packages and p.backend == "venv" and p.interpreter.startswith("/") \
                    and not p.interpreter.startswith(SYSTEM_PREFIXES):
                out.append(Run(argv=[p.interpreter, "-c", BASE_SITE_PTH, p.prefix]))
        out.append(Run(argv=[python_of(p.prefix), "-c", PRUNE_PTH]))
        return out
    # conda
    specs = list(p.conda_specs) or [f"python={p.python}"]
    record = f"{state_dir(p.prefix)}/conda-packages.txt"
    channel = ["--override-channels", "-c", p.conda_channel] if p.conda_channel else []
    if p.conda_tool:
        out.append(Run(argv=[p.conda_tool, "create", "-y", "-p", p.prefix, *channel, *specs],
                       stdout=record))
    else:
        script = f"{state_dir(p.prefix)}/rattler_create.py"
        out.append(CopyAsset(asset="node/rattler_create.py", dest=script))
        out.append(Run(argv=[p.helper_python or "python3", script, "--prefix", p.prefix,
                             *(["--channel", p.conda_channel] if p.conda_channel else []), *specs],
                       stdout=record))
    if p.python_from == "conda":
        out.append(Run(argv=["sh", "-c", 'test -x "$1/bin/python" || { echo "$1/bin/python is '
                             'missing after installing the conda packages from $3; add python=$2 to '
                             'the conda specs or leave python out to use the node\'s Python" >&2; exit 1; }',
                             "sh", p.prefix, p.python, p.conda_channel or "conda-forge"], changes=False))
    else:
        out.append(Run(argv=venv))
    return out


def requirement_line(r: P.Requirement, with_hashes: bool) -> str:
    line = r.requirement
    if with_hashes:
        line += "".join(f" --hash={h if ':' in h else 'sha256:' + h}" for h in r.hashes)
    return line


# Up to Python 3.11 `python -m venv` runs ensurepip, which installs pip and setuptools from the
# wheels the interpreter carries (2-3 CPU-s: pip installs itself and compiles every file). Where
# uv fills a venv it is made --without-pip, and this installs with uv those of ensurepip's
# wheels whose projects the first argument names (comma-separated): ensurepip's pip and
# setuptools where the recipe locks no pip (PipToolingParams.seed_ensurepip; pip-tooling installs
# a locked setuptools itself), or its setuptools alone where uv installs the locked pip next and
# a build without isolation needs setuptools (seed_setuptools). The same versions and bytes,
# found as ensurepip finds them (its bundled folder, or the folder a distribution's build names,
# WHEEL_PKG_DIR: Debian's /usr/share/python-wheels), not compiled to bytecode at install (Python
# writes that at the first import, as for everything uv installs): ~0.2 CPU-s. The argv after
# the names is the install command (a repair's --reinstall with it). The planner asks for it
# from Python 3.10, whose ensurepip says where its wheels are; where it names none, or a file
# that is not there, ensurepip runs itself, as the venv would have (a repair then reinstalls
# nothing of the same version). A Python without ensurepip (Debian's without its python3.X-venv
# package) stops with that said.
SEED_ENSUREPIP = ("import os, subprocess, sys\n"
                  "try:\n"
                  "    import ensurepip\n"
                  "except ImportError:\n"
                  "    sys.exit('envbuild: this Python has no ensurepip, which a venv needs '\n"
                  "             '(Debian and Ubuntu: apt-get install python%d.%d-venv)' % sys.version_info[:2])\n"
                  "want = sys.argv[1].split(',')\n"
                  "get = getattr(ensurepip, '_get_packages', None)\n"
                  "pkgs = get() if get else {}\n"
                  "wheels = sorted(p.wheel_path or os.path.join(os.path.dirname(ensurepip.__file__), '_bundled', "
                  "p.wheel_name) for name, p in pkgs.items() if name in want)\n"
                  "if len(wheels) == len(want) and all(os.path.isfile(w) for w in wheels):\n"
                  "    sys.exit(subprocess.call(sys.argv[2:] + ['--no-deps', '--no-index'] + wheels))\n"
                  "print('envbuild: no wheels from ensurepip (%s); running ensurepip' % (', '.join(wheels) or 'none named'),\n"
                  "      flush=True)\n"
                  "sys.exit(subprocess.call([sys.executable, '-m', 'ensurepip', '--upgrade', '--default-pip']))\n")


def _pip_tooling(step, p: P.PipToolingParams, prefix: str) -> list[Action]:
    """The locked tooling, hash-checked; without a lock entry, the bare specifiers. First, where
    the plan says so, ensurepip's wheels (``SEED_ENSUREPIP``): pip and setuptools, or setuptools
    alone."""
    links = [f"--find-links={d}" for d in p.find_links] + (["--no-index"] if p.no_index else [])
    install = install_argv(prefix, p.installer, p.uv)
    log = log_path(prefix, step.id)
    out: list[Action] = []
    seeded = list(p.seed_ensurepip) + (["setuptools"] if p.seed_setuptools else [])
    if seeded:
        out.append(Run(argv=[python_of(prefix), "-c", SEED_ENSUREPIP, ",".join(seeded), *install],
                       repair_args=repair_args(p.installer), log=log, env_from=env_from(p.installer)))
    if not p.requirements:  # ensurepip's wheels alone: the recipe locks no tooling
        return out
    if all(r.hashes for r in p.requirements):
        path = f"{state_dir(prefix)}/requirements/pip-tooling.txt"
        return [*out, WriteFile(path=path, content="".join(requirement_line(r, True) + "\n" for r in p.requirements)),
                Run(argv=[*install, "-r", path, "--require-hashes", "--no-deps", *links],
                    repair_args=repair_args(p.installer), log=log, env_from=env_from(p.installer))]
    return [*out, Run(argv=[*install, *(r.requirement for r in p.requirements), *links],
                      repair_args=repair_args(p.installer), log=log, env_from=env_from(p.installer))]


def _uv_tool(step, p: P.UvToolParams, prefix: str) -> list[Action]:
    """The controller's uv (asset ``uv/uv``, see envbuild.actions.assets) onto the node; its
    sha256 is the step's effect, checked on the node after the copy."""
    return [MakeDir(path=p.dest.rsplit("/", 1)[0] or "/"), CopyAsset(asset="uv/uv", dest=p.dest, perm="0755")]


def _pip_install(step, p: P.PipInstallParams, prefix: str) -> list[Action]:
    """Hash-checked packages in one pip call (--require-hashes), the unverified ones (allowed
    by name in the plan) in another, packages built without isolation in a third: pip's hash
    mode and isolation flag apply to a whole invocation."""
    groups: list[tuple[str, list[P.Requirement], list[str]]] = []
    no_iso = set(p.no_build_isolation)
    hashed = [r for r in p.requirements if r.hashes and r.name not in no_iso]
    plain = [r for r in p.requirements if not r.hashes and r.name not in no_iso]
    isolated = [r for r in p.requirements if r.name in no_iso]
    deps = ["--no-deps"] if p.no_deps else []
    if hashed:
        groups.append(("", hashed, ["--require-hashes", "--no-deps"]))
    if plain:
        groups.append(("-unverified", plain, deps))
    if isolated:
        groups.append(("-no-isolation", isolated, ["--no-build-isolation", *deps]))
    index = (["--index-url", p.index_url] if p.index_url else []) + (["--no-index"] if p.no_index else [])
    index += [f"--find-links={d}" for d in p.find_links]
    out: list[Action] = []
    base = f"{state_dir(prefix)}/requirements/{step.id.replace(':', '-')}"
    for suffix, reqs, flags in groups:
        path = f"{base}{suffix}.txt"
        with_hashes = "--require-hashes" in flags
        # builds without isolation stay with pip, even in a uv step (envbuild.plan.installer)
        installer = p.installer if suffix != "-no-isolation" else "pip"
        out.append(WriteFile(path=path, content="".join(requirement_line(r, with_hashes) + "\n" for r in reqs)))
        out.append(Run(argv=[*install_argv(prefix, installer, p.uv), "-r", path, *flags, *index],
                       env=dict(p.env), repair_args=repair_args(installer), log=log_path(prefix, step.id),
                       env_from=env_from(installer)))
    return out


def _git_source(step, p: P.GitSourceParams, prefix: str) -> list[Action]:
    return [GitCheckout(fetch_url=p.fetch_url, url=p.url, ref=p.ref, sha=p.sha, dest=p.dest,
                        submodules=list(p.submodules), submodule_mirrors=dict(p.submodule_mirrors),
                        without=list(p.without))]


def _data(step, p: P.DataParams, prefix: str) -> list[Action]:
    """envbuild's stdlib fetcher (envbuild/node/fetch_data.py) once per file: mirror or URL, sha256
    checked and recorded, .xz unpacked (envbuild.plan.data)."""
    tool = f"{state_dir(prefix)}/tools/fetch_data.py"
    out: list[Action] = [MakeDir(path=p.record_dir), CopyAsset(asset="node/fetch_data.py", dest=tool)]
    for f in p.files:
        argv = [python_of(prefix), tool, "--name", f.name, "--url", f.url, "--dest", f.dest,
                "--record-dir", p.record_dir]
        argv += ["--sha256", f.sha256] if f.sha256 else []
        argv += ["--mirror", f.mirror] if f.mirror else []
        argv += ["--decompress", f.decompress] if f.decompress else []
        argv += ["--root", p.tree] if p.tree else []
        out.append(Run(argv=argv))
    return out


def patch_spec(p: P.PatchParams) -> dict:
    return {"id": p.id, "kind": p.patch_kind, "file": p.file, "old": p.old, "new": p.new,
            "count": p.count, "decision": p.decision, "nvcc": p.nvcc, "torch_cuda": p.torch_cuda}


def _patch(step, p: P.PatchParams, prefix: str) -> list[Action]:
    return [ApplyPatch(spec=patch_spec(p), dest=p.dest, diff_dir=f"{state_dir(prefix)}/patches")]


def _build(step, p: P.BuildParams, prefix: str) -> list[Action]:
    # The recipe's published build commands are shell by nature; they come from the recipe
    # author (reviewed data), run by bash with the tree as cwd.
    return [Run(argv=["bash", "-ec", cmd], cwd=p.dest, env=dict(p.env), path=[f"{prefix}/bin"],
                log=log_path(prefix, step.id))
            for cmd in p.commands]


def _apex_build(step, p: P.ApexBuildParams, prefix: str) -> list[Action]:
    return [BuildWheel(argv=list(p.wheel_argv), cwd=p.dest, env=dict(p.env), outdir=p.wheel_dir,
                       cache_key=p.cache_key, path=[f"{prefix}/bin"]),
            Run(argv=[python_of(prefix), *PIP, "--no-deps", "--no-index", "--force-reinstall",
                      f"--find-links={p.wheel_dir}", p.dist_name])]


PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def _install_source(step, p: P.InstallSourceParams, prefix: str) -> list[Action]:
    py = python_of(prefix)
    if p.mode == "pth":
        # the .pth goes into the env's own purelib, found by the env's python itself
        code = ("import sys, sysconfig, pathlib; "
                "pathlib.Path(sysconfig.get_paths()['purelib'], 'envbuild-' + sys.argv[1] + '.pth')"
                ".write_text(sys.argv[2] + '\\n')")
        return [Run(argv=[py, "-c", code, p.name, p.dest])]
    # pip: a build without isolation against the environment's own setuptools, as published
    return [Run(argv=[py, *PIP, "--no-deps", "--no-build-isolation",
                      *(["-e"] if p.mode == "editable" else []), p.dest], repair_args=PIP_REPAIR,
                log=log_path(prefix, step.id))]


def home_word(path: str) -> str | None:
    """A path under the user's home (``~`` or ``~/...``, a prefix planned without the node's
    facts) as one shell word that still means the home folder, ``"$HOME"/'...'`` (no shell
    expands ``~`` inside quotes); None for any other path."""
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + ("/" + shlex.quote(path[2:]) if path[2:] else "")
    return None


def env_file_text(prefix: str, variables: dict[str, str]) -> str:
    """The environment file: every value shell-quoted; names are POSIX names (the recipe
    and target schemas refuse others)."""
    bin_dir = prefix.rstrip("/") + "/bin"
    lines = ["# written by envbuild; source it before running the recipe",
             f"export VIRTUAL_ENV={home_word(prefix) or shlex.quote(prefix)}",
             f"export PATH={home_word(bin_dir) or shlex.quote(bin_dir)}:\"$PATH\""]
    for k, v in variables.items():
        if not ENV_NAME_RE.match(k):  # the schemas refuse these at load; never write one
            raise ValueError(f"not a POSIX variable name: {k!r}")
        lines.append(f"export {k}={shlex.quote(str(v))}")
    return "\n".join(lines) + "\n"


def _env_file(step, p: P.EnvFileParams, prefix: str) -> list[Action]:
    return [WriteFile(path=p.path, content=env_file_text(prefix, p.vars))]


def _import_check(step, p: P.ImportCheckParams, prefix: str) -> list[Action]:
    return [Run(argv=[python_of(prefix), "-c", IMPORT_CODE, *p.modules], changes=False)]


def _smoke(step, p: P.SmokeParams, prefix: str) -> list[Action]:
    out: list[Action] = [MakeDir(path=p.dir)]
    for run in p.runs:
        if run.script:
            out.append(CopyAsset(asset=f"smoke/{run.script}", dest=f"{p.dir}/{run.script}"))
    for run in p.runs:
        out.append(Capture(name=run.name, argv=list(run.argv), cwd=run.cwd, dir=p.dir,
                           env_file=p.env_file, env=dict(run.env), timeout=run.timeout))
    return out


# --- the container backend: the node's engine builds the image and runs the checks in it ---

# a wheel of the node's wheelhouse into the build context: hard link, else copy
LINK_OR_COPY = 'ln -f "$1" "$2" 2>/dev/null || cp -f "$1" "$2"'
ENROOT_SCHEME = {"podman": "podman", "docker": "dockerd"}  # enroot import URI schemes


def engine_env(e: P.Engine) -> dict[str, str]:
    """The environment of every command of the engine ``e`` (docker: BuildKit, which the
    rendered Dockerfile's ``RUN --mount`` needs)."""
    return {**({"DOCKER_BUILDKIT": "1"} if e.name == "docker" else {}), **e.env}


def engine_build_argv(e: P.Engine, tag: str, context: str, labels: dict[str, str]) -> list[str]:
    """``<engine> build`` of ``context`` tagged ``tag``; podman writes Docker-format images
    (the Dockerfile's instructions as Docker reads them)."""
    out = [e.name, "build", *(["--format", "docker"] if e.name == "podman" else []), *e.build_args]
    for k, v in sorted(labels.items()):
        out += ["--label", f"{k}={v}"]
    return out + ["-t", tag, "-f", f"{context.rstrip('/')}/Dockerfile", context]


def engine_run_argv(e: P.Engine, tag: str, argv: list[str], *, workdir: str | None = None,
                    env: dict[str, str] | None = None, mounts: list[tuple[str, str]] = (),
                    gpus: bool = False, shm_size: str | None = None) -> list[str]:
    """``<engine> run --rm --network=none ... tag argv``: a throwaway container without a
    network (the node's network is left alone); GPUs through docker's ``--gpus`` or podman's
    CDI device; ``mounts`` are ``(node folder, folder in the container)``."""
    out = [e.name, "run", "--rm", "--network=none"]
    if gpus:
        out += ["--gpus", "all"] if e.name == "docker" else ["--device", "nvidia.com/gpu=all"]
    if shm_size:
        out += [f"--shm-size={shm_size}"]
    for src, dst in mounts:
        out += ["-v", f"{src}:{dst}"]
    if workdir:
        out += ["-w", workdir]
    for k, v in (env or {}).items():
        out += ["-e", f"{k}={v}"]
    return out + [tag, *argv]


def image_actions(p: P.ImageParams, files: dict[str, str], modes: dict[str, str],
                  assets: dict[str, str]) -> list[Action]:
    """The image step's actions, given the build context rendered from its plan (``p.image``;
    ``envbuild.render.steps``): ``files`` generated (relative path -> text), ``modes`` theirs
    and the assets' (default 0644), ``assets`` envbuild's own files (relative path -> asset).
    Write the context afresh (a file left from an older context would be COPY'd too), take
    the wheels from the node's wheelhouse, build with the context's digest as a label."""
    ctx = p.context_dir.rstrip("/")
    out: list[Action] = [Run(argv=["rm", "-rf", ctx]), MakeDir(path=ctx)]
    out += [WriteFile(path=f"{ctx}/{rel}", content=text, perm=modes.get(rel, "0644"))
            for rel, text in sorted(files.items())]
    out += [CopyAsset(asset=asset, dest=f"{ctx}/{rel}", perm=modes.get(rel, "0644"))
            for rel, asset in sorted(assets.items())]
    if p.wheels:
        out.append(MakeDir(path=f"{ctx}/wheelhouse"))
        out += [Run(argv=["sh", "-c", LINK_OR_COPY, "sh", f"{(p.wheelhouse or '.').rstrip('/')}/{name}",
                          f"{ctx}/wheelhouse/{name}"]) for name in sorted(p.wheels)]
    out.append(Run(argv=engine_build_argv(p.engine, p.tag, ctx, {P.CONTEXT_LABEL: p.context_sha256}),
                   env=engine_env(p.engine)))
    return out


def _image(step, p: P.ImageParams, prefix: str) -> list[Action]:
    raise ValueError(f"step {step.id}: an image step's actions come with the build context rendered "
                     "from its plan (envbuild.render.steps.step_actions)")


def _image_import(step, p: P.ImageImportParams, prefix: str) -> list[Action]:
    """``enroot import -o`` refuses an existing file: import beside it, then rename."""
    part = p.path + ".partial"
    folder = p.path.rsplit("/", 1)[0] or "/"
    return [MakeDir(path=folder), Run(argv=["rm", "-f", part]),
            Run(argv=["enroot", "import", "-o", part, f"{ENROOT_SCHEME[p.engine.name]}://{p.tag}"],
                env=engine_env(p.engine)),
            Run(argv=["mv", "-f", part, p.path])]


def _image_check(step, p: P.ImageCheckParams, prefix: str) -> list[Action]:
    return [MakeDir(path=p.dir),
            Capture(name=p.name, argv=engine_run_argv(p.engine, p.tag, list(p.argv), gpus=p.gpus),
                    cwd=p.dir, dir=p.dir, env=engine_env(p.engine), timeout=900)]


def _image_smoke(step, p: P.ImageSmokeParams, prefix: str) -> list[Action]:
    out: list[Action] = [MakeDir(path=p.dir)]
    out += [CopyAsset(asset=f"smoke/{r.script}", dest=f"{p.dir}/{r.script}") for r in p.runs if r.script]
    for r in p.runs:
        argv = engine_run_argv(p.engine, p.tag, list(r.argv), workdir=r.cwd, env=dict(r.env),
                               mounts=[(p.dir, p.image_dir)], gpus=p.gpus, shm_size=p.shm_size)
        out.append(Capture(name=r.name, argv=argv, cwd=p.dir, dir=p.dir, env=engine_env(p.engine),
                           timeout=r.timeout))
    return out


def _bundle(step, p: P.BundleParams, prefix: str) -> list[Action]:
    """The bundle's node/ folder onto the node; its files are hash-checked by the effect."""
    return [MakeDir(path=p.dir),
            StageDir(src=p.src.rstrip("/") + "/", dest=p.dir.rstrip("/") + "/",
                     files={f.name: f.sha256 for f in p.files})]


_BY_KIND = {
    "bundle": _bundle,
    "image": _image, "image_import": _image_import, "image_check": _image_check,
    "image_smoke": _image_smoke,
    "preflight": _preflight, "system_packages": _system_packages, "environment": _environment,
    "uv_tool": _uv_tool,
    "pip_tooling": _pip_tooling, "pip_install": _pip_install, "git_source": _git_source,
    "patch": _patch, "build": _build, "apex_build": _apex_build,
    "install_source": _install_source, "env_file": _env_file, "import_check": _import_check,
    "smoke": _smoke, "data": _data,
}


def plan_actions(plan) -> list[tuple[object, list[Action]]]:
    """``[(step, actions)]`` for a whole plan."""
    return [(s, actions(s, plan.prefix)) for s in plan.steps]


def dumps(acts: list[Action]) -> str:
    return json.dumps([a.model_dump(mode="json") for a in acts], indent=2)
