"""Resolve Python requirements with uv for the target's interpreter and platform.

Building the uv command is pure (``uv_command``), parsing its two outputs is pure
(``parse_pylock`` for the chosen files and hashes, ``parse_via`` for who requires what), and
``install_order`` sorts dependencies first. Only ``resolve`` runs uv. uv's HTTP cache lives in
``CACHE/uv`` so a second lock of the same recipe does not download metadata again.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import EnvironmentProblem, InputError
from envbuild.lock.indexes import describe_versions, pypi_versions
from envbuild.lock.schema import normalize

UV_PLATFORM_GLIBC = (17, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40)  # uv's manylinux_2_NN choices
UV_TIMEOUT = 600.0


@dataclass(frozen=True)
class UvRequest:
    """Everything uv needs to resolve one set of requirements for one target."""

    requirements: tuple[str, ...]
    python: str  # "3.9"
    python_platform: str  # "x86_64-manylinux_2_31"
    exclude_newer: str | None = None  # "2022-05-04"
    excludes: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    extra_indexes: tuple[str, ...] = ()
    no_build_metadata: tuple[tuple[str, str], ...] = ()  # (name, version): static empty metadata
    # (source name, requirement lines): what a source install declares, in a file of its own
    # (src-<name>.in) so that uv's "# via" names the source that brought each dependency
    source_requirements: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (source name, requirement lines): what a source build needs in the environment (it is
    # built with --no-build-isolation), in build-<name>.in: "# via" says build:<name>
    build_requirements: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (name, version) uv should keep where the requirements allow (the existing lock's pins,
    # envbuild.lock.keep): given as the output file uv reads its preferences from
    preferences: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Resolved:
    """One package as uv resolved it, with the file chosen for the target."""

    name: str
    version: str
    kind: str  # wheel | sdist
    url: str
    sha256: str
    required_by: tuple[str, ...] = field(default=())


def python_platform(arch: str, glibc: str) -> str:
    """uv's ``--python-platform`` for a glibc: the newest manylinux_2_NN not above it."""
    try:
        minor = int(str(glibc).split(".")[1])
    except (IndexError, ValueError):
        raise InputError(f"target glibc {glibc!r} is not MAJOR.MINOR",
                         hint="set platform.glibc in the target, e.g. '2.31'") from None
    fitting = [n for n in UV_PLATFORM_GLIBC if n <= minor]
    if not fitting:
        raise InputError(f"glibc {glibc} is older than manylinux2014 (2.17)",
                         hint="no manylinux wheel runs there; use a newer OS image")
    return f"{arch}-manylinux_2_{fitting[-1]}"


def platform_tags(python: str, pyplat: str) -> list[str]:
    """Interpreter and platform tags, e.g. ``['cp39', 'manylinux_2_31_x86_64']``."""
    arch, _, rest = pyplat.partition("-")
    return [f"cp{python.replace('.', '')}", f"{rest}_{arch}"]


def uv_config(req: UvRequest) -> str:
    """uv.toml text: static metadata for sdists that cannot be built in isolation (pure).

    Packages such as flash-attn import torch in setup.py; uv would have to build them to
    learn their dependencies. They are given empty metadata instead: their sdist is locked,
    their dependencies are not (the recipe names the ones that matter).
    """
    out = []
    for name, version in req.no_build_metadata:
        out.append(f'[[dependency-metadata]]\nname = "{name}"\nversion = "{version}"\nrequires-dist = []\n')
    return "\n".join(out)


SOURCE_IN = "src-{}.in"  # input file of one source's declared dependencies
BUILD_IN = "build-{}.in"  # input file of one source's build requirements


def uv_command(req: UvRequest, in_file: Path | list[Path], excludes_file: Path | None, fmt: str,
               cache_dir: Path, config_file: Path, *, output_file: Path | None = None,
               constraints: Path | None = None) -> list[str]:
    """The ``uv pip compile`` argument list (pure); ``config_file`` replaces any user uv.toml.
    ``in_file``: the recipe's requirements, then one file per source install. ``output_file``:
    where uv writes (and first reads the pins it prefers to keep); ``constraints``: exact pins
    the result must hold (the pylock pass of a resolution made with preferences)."""
    files = [in_file] if isinstance(in_file, Path) else list(in_file)
    cmd = ["uv", "pip", "compile", *map(str, files), "--config-file", str(config_file), "--quiet", "--no-header",
           "--python-version", req.python, "--python-platform", req.python_platform,
           "--format", fmt, "--cache-dir", str(cache_dir)]
    if fmt == "requirements.txt":
        cmd += ["--annotation-style", "split"]
    if req.exclude_newer:
        cmd += ["--exclude-newer", req.exclude_newer]
    if excludes_file is not None:
        cmd += ["--excludes", str(excludes_file)]
    for link in req.find_links:
        cmd += ["--find-links", link]
    for index in req.extra_indexes:
        cmd += ["--extra-index-url", index]
    if output_file is not None:
        cmd += ["--output-file", str(output_file)]
    if constraints is not None:
        cmd += ["--constraints", str(constraints)]
    return cmd


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")


def exact_pins(requirements_txt: str) -> list[str]:
    """``name==version`` of every package in uv's requirements output (pure)."""
    return [f"{m.group(1)}=={m.group(2)}" for line in requirements_txt.splitlines()
            if (m := _PIN.match(line))]


def parse_pylock(text: str, prefer_prefix: str | None = None) -> dict[str, tuple[str, str, str, str, str]]:
    """``{normalized name: (name, version, kind, url, sha256)}`` from uv's pylock.toml output.

    A wheel is preferred over the sdist; among wheels the one whose URL starts with
    ``prefer_prefix`` (a local wheelhouse) wins, else the first uv lists.
    """
    data = tomllib.loads(text)
    out: dict[str, tuple[str, str, str, str, str]] = {}
    for pkg in data.get("packages", []):
        wheels = list(pkg.get("wheels", []))
        if prefer_prefix:
            wheels.sort(key=lambda w: not str(w.get("url", w.get("path", ""))).startswith(prefer_prefix))
        if wheels:
            chosen, kind = wheels[0], "wheel"
        elif "sdist" in pkg:
            chosen, kind = pkg["sdist"], "sdist"
        else:
            continue  # a direct reference without a file (not produced for index packages)
        url = str(chosen.get("url") or chosen.get("path"))
        sha = chosen.get("hashes", {}).get("sha256", "")
        out[normalize(pkg["name"])] = (pkg["name"], str(pkg["version"]), kind, url, sha)
    return out


def parse_via(text: str) -> dict[str, list[str]]:
    """``{normalized name: [requirers]}`` from ``# via`` annotations: ``-r src-NAME.in`` ->
    ``source:NAME`` (a source install's declared dependency), ``-r build-NAME.in`` ->
    ``build:NAME`` (what building that source needs), any other ``-r FILE`` -> ``recipe``."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    in_via = False
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==", line)
        if m:
            current, in_via = normalize(m.group(1)), False
            out.setdefault(current, [])
            continue
        stripped = line.strip()
        if current is None or not stripped.startswith("#"):
            continue
        body = stripped.lstrip("#").strip()
        if body.startswith("via"):
            in_via = True
            body = body[3:].strip()
        if not in_via or not body:
            continue
        for item in body.split(","):
            item = item.strip()
            if item:
                out[current].append(_requirer(item))
    return {k: sorted(set(v)) for k, v in out.items()}


def _requirer(item: str) -> str:
    if not item.startswith(("-r", "-c", "-o")):
        return normalize(item)
    name = Path(item[2:].strip()).name
    if m := re.fullmatch(r"src-(.+)\.in", name):
        return f"source:{m.group(1)}"
    if m := re.fullmatch(r"build-(.+)\.in", name):
        return f"build:{m.group(1)}"
    return "recipe"


def install_order(required_by: dict[str, list[str]]) -> list[str]:
    """Dependencies first; ties (and cycles) broken alphabetically, so the order is stable."""
    deps: dict[str, set[str]] = {name: set() for name in required_by}
    for name, parents in required_by.items():
        for parent in parents:
            if parent in deps:
                deps[parent].add(name)
    done: list[str] = []
    placed: set[str] = set()
    pending = sorted(deps)
    while pending:
        ready = [n for n in pending if deps[n] <= placed] or [pending[0]]  # cycle: take the first
        nxt = ready[0]
        done.append(nxt)
        placed.add(nxt)
        pending.remove(nxt)
    return done


_NO_VERSION = re.compile(r"there is no version of ([A-Za-z0-9._-]+)(?:\[[^\]]*\])?([=<>!~][^ ,]*)")
_NOT_FOUND = re.compile(r"([A-Za-z0-9._-]+) was not found in the (?:package registry|provided package locations)")


def explain_failure(stderr: str, req: UvRequest) -> InputError | EnvironmentProblem:
    """Turn uv's failure text into one error: no such version / project, network, or conflict."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    cause = next((ln.removeprefix("cause:").strip() for ln in lines if ln.startswith("cause:")
                  and "Because" in ln), lines[-1] if lines else "uv failed without output")
    if m := _NO_VERSION.search(stderr):
        name, spec = m.group(1), m.group(2)
        versions = pypi_versions(name)
        wanted = spec.lstrip("=<>!~")
        if spec.startswith("==") and versions and wanted in versions and req.exclude_newer:
            return InputError(f"{name} {wanted} exists on PyPI but was published after the recipe's "
                              f"resolve_as_of {req.exclude_newer}",
                              hint="move resolve_as_of to a later date or pin an older version; "
                                   f"versions: {describe_versions(versions, wanted)}")
        return InputError(f"no version of {name} matches {spec} on PyPI",
                          hint=f"versions that exist: {describe_versions(versions, wanted)}")
    if m := _NOT_FOUND.search(stderr):
        return InputError(f"package {m.group(1)} does not exist on the index",
                          hint="check the name in the recipe (PyPI names, e.g. 'py-cpuinfo')")
    if "Failed to fetch" in stderr or "error sending request" in stderr or "dns error" in stderr:
        return EnvironmentProblem(f"uv could not reach the package index: {cause}",
                                  hint="check the network or pass --wheelhouse DIR")
    hint = next((ln.removeprefix("hint:").strip() for ln in lines if ln.startswith("hint:")), None)
    return InputError(f"requirements cannot be resolved for Python {req.python} on "
                      f"{req.python_platform}: {cause}",
                      hint=hint or "relax or change the conflicting pins in the recipe")


def uv_binary() -> str:
    """uv's own way of finding its binary (the one installed with envbuild's dependency, in
    the same environment), else ``uv`` on PATH."""
    try:
        from uv import find_uv_bin
    except ModuleNotFoundError as exc:
        if exc.name != "uv":
            raise
        return "uv"
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return "uv"


def _run(cmd: list[str], extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if cmd and cmd[0] == "uv":
        cmd = [uv_binary(), *cmd[1:]]
    env = dict(os.environ, **(extra_env or {}))
    # UV_NATIVE_TLS: the system's trust store, as envbuild's own client (envbuild.http) uses
    env.update(UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1", NO_COLOR="1", UV_NATIVE_TLS="1")
    env.pop("UV_INDEX_URL", None)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=UV_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EnvironmentProblem("uv is not installed", hint="pip install uv") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"uv did not finish in {UV_TIMEOUT:.0f} s",
                                 hint="is the package index slow? rerun; uv's cache keeps progress") from None


def resolve(req: UvRequest, cache_dir: Path, prefer_prefix: str | None = None,
            env: dict[str, str] | None = None) -> list[Resolved]:
    """Resolve ``req`` with uv; packages in install order (dependencies first).

    ``env``: extra environment for uv (install-time variables some sdists need to build
    their metadata).
    """
    if not req.requirements and not any(lines for _, lines in req.source_requirements
                                        + req.build_requirements):
        return []
    with tempfile.TemporaryDirectory(prefix="envbuild-lock-") as tmp:
        in_file = Path(tmp) / "recipe.in"
        in_file.write_text("\n".join(req.requirements) + "\n")
        in_files = [in_file]
        for pattern, groups in ((SOURCE_IN, req.source_requirements), (BUILD_IN, req.build_requirements)):
            for name, lines in groups:
                in_files.append(Path(tmp) / pattern.format(name))
                in_files[-1].write_text("\n".join(lines) + "\n")
        excl = None
        if req.excludes:
            excl = Path(tmp) / "excludes.txt"
            excl.write_text("\n".join(req.excludes) + "\n")
        config = Path(tmp) / "uv.toml"
        config.write_text(uv_config(req))
        outputs = {}
        if req.preferences:
            # uv keeps the pins of its output file where the requirements allow (uv's own
            # re-lock semantics); the pylock pass is then held to exactly what that chose
            kept = Path(tmp) / "requirements.txt"
            kept.write_text("".join(f"{name}=={version}\n" for name, version in req.preferences))
            proc = _run(uv_command(req, in_files, excl, "requirements.txt", cache_dir, config,
                                   output_file=kept), env)
            if proc.returncode != 0:
                raise explain_failure(proc.stderr, req)
            outputs["requirements.txt"] = kept.read_text()
            pins = Path(tmp) / "pins.txt"
            pins.write_text("\n".join(exact_pins(outputs["requirements.txt"])) + "\n")
            proc = _run(uv_command(req, in_files, excl, "pylock.toml", cache_dir, config, constraints=pins), env)
            if proc.returncode != 0:
                raise explain_failure(proc.stderr, req)
            outputs["pylock.toml"] = proc.stdout
        for fmt in ("pylock.toml", "requirements.txt"):
            if fmt in outputs:
                continue
            proc = _run(uv_command(req, in_files, excl, fmt, cache_dir, config), env)
            if proc.returncode != 0:
                raise explain_failure(proc.stderr, req)
            outputs[fmt] = proc.stdout
    files = parse_pylock(outputs["pylock.toml"], prefer_prefix)
    via = parse_via(outputs["requirements.txt"])
    for name in files:
        via.setdefault(name, ["recipe"])
    order = [n for n in install_order({k: v for k, v in via.items() if k in files})]
    return [Resolved(*files[n], required_by=tuple(via[n])) for n in order]
