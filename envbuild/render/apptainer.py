"""Plan + actions -> an Apptainer (SingularityCE) definition. Pure: returns a ``Context``.

    envbuild.def    Bootstrap/From, %labels, %files, %environment, %post, %test, %help
    envbuild/...    files the definition copies in (%files): the node tool and its action
                    files, smoke scripts, verify.sh, verify_image.py, verify.json, the lock

The image plan is the Dockerfile's (``envbuild.render.image``); ``%post`` is the same shell
translation of the same actions (``envbuild.render.shell``), one block per step with its id and
reason as comments, in one stage (an Apptainer build keeps no layers, so a devel stage would
save nothing but the extension's source tree). ``%test`` runs ``verify.sh``;
``apptainer run-help`` prints the help. Build it from the folder holding it:

    apptainer build envbuild.sif envbuild.def
"""

from __future__ import annotations

import re

from envbuild import __version__
from envbuild.actions.model import CopyAsset
from envbuild.render.context import Context
from envbuild.render.regenerate import render_command
from envbuild.plan.image import WHEELHOUSE
from envbuild.plan.params import ImagePlan
from envbuild.render.image import build_steps, verify_files, verify_sh, where
from envbuild.render.shell import commands, q, ship_into, shipped


def _bootstrap(image: str) -> list[str]:
    if image.endswith(".sif"):
        return ["Bootstrap: localimage", f"From: {image}"]
    return ["Bootstrap: docker", f"From: {image}"]


def _label(value: str) -> str:
    return " ".join(value.split())


def render(ip: ImagePlan, regenerate: str | None = None) -> Context:
    """The definition file and the files it copies in. ``regenerate``: the command its header
    names (default: the recipe and target by name, ``envbuild.render.regenerate``)."""
    files: dict = {}
    steps = build_steps(ip)
    for _, acts in steps:
        ship_into(files, shipped([a for a in acts if not isinstance(a, CopyAsset)]))
        ship_into(files, shipped([a for a in acts if isinstance(a, CopyAsset)]))
    ship_into(files, verify_files(ip))
    files["verify.sh"] = verify_sh(ip, q(ip.files_dir))
    if ip.lock_text is not None:
        files["envbuild.lock"] = ip.lock_text

    out = _bootstrap(ip.base.image) + [
        "",
        f"# Image of {ip.recipe} for {ip.target}, rendered by envbuild {__version__}; "
        f"lock digest {ip.plan.lock_digest or 'none'}.",
        f"# Regenerate: {regenerate or render_command(ip.recipe, ip.target, 'apptainer')}",
        "# Build:      apptainer build envbuild.sif envbuild.def   (in this folder)",
        f"# base: {ip.base.image}: {_label(ip.base.why)} ({ip.base.source})",
    ]
    if ip.wheelhouse:
        out.append(f"# wheels: build with --bind wheelhouse:{WHEELHOUSE} (this folder's wheelhouse/)")
    for note in ip.notes:
        out.append(f"# note: {_label(note)}")
    if not ip.feasible:
        out.append(f"# PREFLIGHT REFUSED THIS TARGET: {_label(ip.plan.steps[0].params.summary)}")

    out += ["", "%labels"]
    out += [f"    {k} {_label(v)}" for k, v in ip.labels.items()]

    out += ["", "%files"]
    out += [f"    envbuild/{rel} {ip.files_dir}/{rel}" for rel in sorted(files)]

    env = ip.env_file()
    out += ["", "%environment", f"    export VIRTUAL_ENV={q(ip.prefix)}",
            f"    export PATH={q(ip.prefix + '/bin')}:\"$PATH\""]
    if env is not None:
        out += ["    # shellcheck source=/dev/null", f"    if [ -f {q(env.path)} ]; then . {q(env.path)}; fi"]

    out += ["", "%post", "    set -eu"]
    for step, acts in steps:
        out += ["", f"    # step {step.id}: {step.title}"]
        out += [f"    # why: {line}" for line in _wrap(step.reason)]
        for cmd in commands(acts, where(ip)):
            first, *rest = cmd.split("\n")
            out.append("    " + first)
            out.extend(_body(step.id, rest))  # heredoc bodies stay exactly as written
        if any("apt-get install" in c for c in commands(acts, where(ip))):
            out.append("    rm -rf /var/lib/apt/lists/*")
    if ip.lock_text is not None:
        out.append(f"    cp {q(ip.files_dir + '/envbuild.lock')} {q(ip.state + '/envbuild.lock')}")

    out += ["", "%test", f"    sh {q(ip.files_dir + '/verify.sh')}",
            "", "%runscript", '    exec "$@"',
            "", "%help",
            f"    {ip.recipe} ({ip.target}): {_label(ip.title)}",
            f"    The environment is the venv at {ip.prefix} (on PATH).",
            "    Check it against its lock: apptainer test IMAGE; with the smoke runs:",
            f"    apptainer exec IMAGE sh {ip.files_dir}/verify.sh --smoke"]
    text = {f"envbuild/{k}": v for k, v in files.items() if isinstance(v, str)}
    copies = {f"envbuild/{k}": v for k, v in files.items() if not isinstance(v, str)}
    text["envbuild.def"] = "\n".join(out) + "\n"
    return Context(files=text, copies=copies, modes={"envbuild/verify.sh": 0o755},
                   wheels=list(ip.wheelhouse))


def _body(step: str, lines: list[str]) -> list[str]:
    """A heredoc's lines, written as they are: refused (InputError) where one would start a
    section of the definition (a line beginning ``%``: ``%setup`` runs on the build host as root)."""
    for line in lines:
        if SECTION_START.match(line):
            from envbuild.errors import InputError

            raise InputError(f"step {step}: a line of the file it writes starts a section of the Apptainer "
                             f"definition: {line[:60]!r}",
                             hint="a patch, env value or file written inline must not have a line starting "
                                  "with '%'; render the Dockerfile (--format dockerfile) instead")
    return lines


SECTION_START = re.compile(r"^\s*%[A-Za-z]")


def _wrap(text: str) -> list[str]:
    import textwrap

    return textwrap.wrap(" ".join(text.split()), 92)


SECTIONS = ("%labels", "%files", "%environment", "%post", "%test", "%runscript", "%help",
            "%setup", "%startscript", "%arguments")


def parse(text: str) -> dict:
    """A definition file's header (``Bootstrap``, ``From``...) and sections, as Apptainer
    reads them: header ``key: value`` lines up to the first ``%section``; each section's body
    verbatim. For tests where no apptainer binary is available."""
    header: dict[str, str] = {}
    sections: dict[str, str] = {}
    current = None
    for line in text.splitlines(keepends=True):
        word = line.split(None, 1)[0] if line.strip() else ""
        if line.startswith("%") and word in SECTIONS:
            current = word
            if current in sections:
                raise ValueError(f"section {current} appears twice")
            sections[current] = ""
        elif current is None:
            if line.strip() and not line.lstrip().startswith("#"):
                key, sep, value = line.partition(":")
                if not sep:
                    raise ValueError(f"header line is not 'Key: value': {line!r}")
                header[key.strip()] = value.strip()
        else:
            sections[current] += line
    return {"header": header, "sections": sections}
