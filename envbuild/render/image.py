"""Rendering helpers an image's renderers share (Dockerfile, Apptainer): the steps of an image
plan (``envbuild.plan.params.ImagePlan``, planned by ``envbuild.plan.image``) as actions, and the
scripts the image carries: ``verify.sh`` (the import check, the lock check and the smoke,
inside the built image) and ``prepare.sh`` (the run-time steps). Pure: a plan in, text out.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from envbuild import __version__
from envbuild.actions.model import BuildWheel
from envbuild.actions.steps import actions as step_actions, python_of
from envbuild.plan import image as I
from envbuild.plan.params import BuildParams, DataParams, ImagePlan, SmokeParams
from envbuild.render.shell import Where, capture_failures, commands, q, shipped
from envbuild.shipped import NODE

VERIFY_TOOL = NODE / "verify_image.py"


def where(ip: ImagePlan) -> Where:
    return Where(files=ip.files_dir, python=python_of(ip.prefix))


def build_steps(ip: ImagePlan, run_time_data: bool = False) -> list[tuple]:
    """``[(step, actions)]`` the image build runs (``envbuild.plan.image.build_steps``)."""
    return [(s, step_actions(s, ip.prefix)) for s in I.build_steps(ip, run_time_data)]


def run_time_steps(ip: ImagePlan) -> list[tuple]:
    """``[(step, actions)]`` that ``prepare.sh`` runs when a container starts."""
    return [(s, step_actions(s, ip.prefix)) for s in I.run_time_steps(ip.plan)]


def verify_steps(ip: ImagePlan) -> list[tuple]:
    return [(s, step_actions(s, ip.prefix)) for s in I.verify_steps(ip)]


def devel_dests(ip: ImagePlan) -> set[str]:
    """Trees only needed to build a wheel (they stay in the devel stage)."""
    return {a.cwd for _, acts in build_steps(ip) for a in acts if isinstance(a, BuildWheel)}


def verify_spec(ip: ImagePlan) -> dict:
    """What ``verify_image.py`` checks inside the image."""
    packages: dict[str, str] = {}
    for s in ip.plan.requirement_installs():
        for r in s.params.requirements:
            packages[r.name] = r.requirement[len(r.name):]
    check = ip.plan.import_check()
    modules = list(check.params.modules) if check is not None else []
    devel = devel_dests(ip)
    trees = {s.params.dest: s.params.sha for s in ip.plan.sources()
             if s.params.sha and s.params.dest not in devel}
    return {"schema": "envbuild.verify/1", "recipe": ip.recipe, "prefix": ip.prefix,
            "lock_sha256": ip.plan.lock_digest, "modules": modules, "packages": packages,
            "sources": trees}


def verify_sh(ip: ImagePlan, files: str) -> str:
    """``verify.sh [--smoke]``: the import check and the lock check inside the image, then the
    smoke runs when asked (their outputs in the plan's smoke folder)."""
    where = Where(files=files, python=python_of(ip.prefix))
    lines = ["#!/bin/sh",
             f"# envbuild {__version__}: checks the image of {ip.recipe} ({ip.target}) "
             "against its lock.",
             "# usage: verify.sh [--smoke]   (run inside the image)",
             "set -eu",
             f"{q(python_of(ip.prefix))} {where.file('verify_image.py')} {where.file('verify.json')}"]
    smoke = [(s, a) for s, a in verify_steps(ip) if isinstance(s.params, SmokeParams)]
    if smoke:
        lines += ['if [ "${1:-}" = --smoke ]; then', "  failed=''"]
        for _, acts in smoke:
            for cmd in commands(acts, where):
                lines.append("  " + cmd)
        lines += ["  " + capture_failures(), "  echo 'smoke passed'", "fi"]
    return "\n".join(lines) + "\n"


STAGE_MODES = """\
# usage: prepare.sh                 fetch and prepare here (one container)
#        prepare.sh --stage DIR     ... and keep what the steps wrote under DIR (with SHA256SUMS);
#                                   DIR kept by an earlier job whose SHA256SUMS holds: nothing done
#        prepare.sh --from DIR      copy what --stage kept into place, every file checked first
mode=run
stage=
case "${1:-}" in
  --stage|--from) mode="${1#--}"; stage="${2:?prepare.sh $1 needs a folder}" ;;
  "") ;;
  *) echo "prepare.sh: unknown argument $1" >&2; exit 2 ;;
esac
checked() { [ -f "$stage/SHA256SUMS" ] && (cd "$stage" && sha256sum -c --quiet --strict SHA256SUMS); }
if [ "$mode" = from ]; then
  checked || { echo "prepare.sh: $stage does not hold data matching its SHA256SUMS" >&2; exit 1; }
  for root in $ROOTS; do
    if [ -d "$stage/files$root" ]; then mkdir -p "$root" && cp -R "$stage/files$root/." "$root/"; fi
  done
  echo "prepare.sh: data copied from $stage (sha256 checked)"
  exit 0
fi
if [ "$mode" = stage ] && checked; then
  echo "prepare.sh: data already prepared in $stage by an earlier job (sha256 checked)"
  exit 0
fi
stamp="$(mktemp)"  # what the steps write is newer: dated a second back (the clock's tick is coarse)
touch -d "@$(($(date +%s) - 1))" "$stamp" 2>/dev/null || sleep 1
"""

KEEP = """\
if [ "$mode" = stage ]; then
  rm -rf "$stage/files" "$stage/SHA256SUMS"
  mkdir -p "$stage/files"
  for root in $ROOTS; do
    find "$root" -type f -newer "$stamp" | while IFS= read -r f; do
      mkdir -p "$stage/files$(dirname "$f")" && cp -p "$f" "$stage/files$f"
    done
  done
  (cd "$stage" && find files -type f -exec sha256sum {} + > SHA256SUMS.partial && mv SHA256SUMS.partial SHA256SUMS)
  echo "prepare.sh: data kept in $stage ($(wc -l < "$stage/SHA256SUMS") file(s))"
fi
rm -f "$stamp"
"""


def run_time_roots(ip: ImagePlan) -> list[str]:
    """The trees the run-time steps write into: each data step's tree, each build step's."""
    roots = {s.params.tree for s, _ in run_time_steps(ip) if isinstance(s.params, DataParams) and s.params.tree}
    roots |= {s.params.dest for s, _ in run_time_steps(ip) if isinstance(s.params, BuildParams)}
    return sorted(roots)


def prepare_sh(ip: ImagePlan, files: str) -> str:
    """``prepare.sh``: the run-time steps (``run_time_steps``), run inside the image before the
    training command; with ``--stage DIR`` once per job (what the steps wrote into their trees
    kept under DIR with its SHA256SUMS, and reused by a later job while that holds), with
    ``--from DIR`` in every other container (copied into place after every file is checked)."""
    where = Where(files=files, python=python_of(ip.prefix))
    lines = ["#!/bin/sh",
             f"# envbuild {__version__}: prepares a container of the image of {ip.recipe} "
             f"({ip.target}) before its run.",
             *("# " + line for line in textwrap.wrap(I.run_time_note(ip) or "", 96)),
             "set -eu",
             f"ROOTS={q(' '.join(run_time_roots(ip)))}  # the trees the steps write into",
             STAGE_MODES.rstrip("\n"),
             "# --- the run-time steps"]
    for step, acts in run_time_steps(ip):
        lines += [f"# step {step.id}: {step.title}", *commands(acts, where)]
    lines += ["# --- end of the run-time steps", KEEP.rstrip("\n")]
    return "\n".join(lines) + "\n"


def verify_files(ip: ImagePlan) -> dict[str, str | Path]:
    """Files of the verify step under the files folder: ``{relative: text or Path}``."""
    out: dict[str, str | Path] = {"verify_image.py": VERIFY_TOOL,
                                  "verify.json": json.dumps(verify_spec(ip), indent=2, sort_keys=True) + "\n"}
    for _, acts in verify_steps(ip):
        out.update(shipped(acts))
    return out
