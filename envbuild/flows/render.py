"""The render flow: a recipe's plan written as Ansible variables, a shell script, a Docker
build context, an Apptainer definition or a CI workflow.

``render(RenderRequest(...)) -> RenderOutcome``: the inputs read (recipe, target, lock, facts),
the plan rendered by ``envbuild.render.formats.render`` (pure), a package without a verified
hash refused before anything is written (as provision refuses it), then the folder written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RenderRequest:
    """``recipe`` (None: the embedded default) on ``target`` as ``fmt`` into ``out`` (default
    ``containers/<recipe>/<target>/<format>``); ``facts_file`` the node facts (node formats;
    every format: ``{inventory.*}`` patch placeholders), ``lock_file``, ``prefix``, ``base``,
    ``wheelhouse``, the packages accepted without a verified hash, and (ci) ``envbuild_source``:
    where the workflow installs envbuild from (default: the commit of the git checkout envbuild
    runs from, at its remote)."""

    target: str
    fmt: str
    recipe: str | None = None
    out: str | None = None
    base: str | None = None
    facts_file: str | None = None
    lock_file: str | None = None
    prefix: str | None = None
    wheelhouse: str | None = None
    allow_unverified: tuple[str, ...] = ()
    envbuild_source: str | None = None


@dataclass(frozen=True)
class RenderOutcome:
    """What was written: the folder, its files, the recipe and target names, whether preflight
    finds the target feasible (and its summary), the image's base and the lock's digest."""

    folder: Path
    files: list[str]
    recipe: str
    target: str
    feasible: bool
    summary: str
    base: str | None
    lock_sha256: str | None

    @property
    def exit_code(self) -> int:
        """0 written; 1 written but preflight refuses the target."""
        return 0 if self.feasible else 1

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "target": self.target, "out": str(self.folder), "files": self.files,
                "feasible": self.feasible, "preflight": self.summary, "base": self.base,
                "lock_sha256": self.lock_sha256}


def _ci_inputs(request: RenderRequest, name: str):
    """The recipe, lock and base as the CI workflow's checkout names them: a file given by path
    relative to this folder (the repository's root, where the workflow runs); a file outside
    it is refused (the workflow could not read it)."""
    from envbuild.errors import InputError
    from envbuild.render.ci import CiInputs

    def in_repo(path: str | None, what: str) -> str | None:
        if path is None:
            return None
        p = Path(path)
        try:
            rel = p.resolve().relative_to(Path.cwd().resolve())
        except ValueError:
            raise InputError(f"{what} {path} is outside this folder, which the CI workflow takes for the "
                             "repository's root", hint="render --format ci from the repository's root, "
                             "with the recipe and lock inside it") from None
        return rel.as_posix()

    if request.fmt != "ci":
        if request.envbuild_source is not None:
            raise InputError("--envbuild-source is where a CI workflow installs envbuild from",
                             hint="use it with --format ci")
        return None
    recipe = request.recipe if request.recipe and not Path(request.recipe).is_file() else None
    given = CiInputs(recipe=recipe or in_repo(request.recipe, "the recipe") or name,
                     lock=in_repo(request.lock_file, "the lock"), base=request.base,
                     source=envbuild_source(request.envbuild_source))
    for value in (given.recipe, given.lock, given.base):
        if value and ("${{" in value or any(c in value for c in "\n\r")):  # Actions evaluates ${{ }} in run:
            raise InputError(f"{value!r} cannot go into a workflow's command (an Actions expression or a line break)",
                             hint="rename the file, or render --format dockerfile and write the workflow yourself")
    return given


def envbuild_source(option: str | None, checkout: Path | None = None):
    """Where a CI workflow installs envbuild from: ``option`` (``--envbuild-source``) when given,
    else the commit HEAD of the git checkout envbuild runs from (``checkout``: default
    ``envbuild.shipped.CHECKOUT``) at its remote ``origin`` (or its only remote). InputError
    for an installed wheel, a checkout without a remote, or a remote that is a local path."""
    from envbuild.errors import InputError
    from envbuild.gitsrc import GitError, run_git
    from envbuild.render.ci import SOURCE_HINT, EnvbuildSource
    from envbuild.shipped import CHECKOUT, INSTALLED

    if option is not None:
        return EnvbuildSource.parse(option)
    if checkout is None and INSTALLED:
        raise InputError("envbuild runs from an installed package, whose source the CI workflow cannot name",
                         hint=SOURCE_HINT)
    folder = checkout or CHECKOUT
    try:
        commit = run_git(["rev-parse", "HEAD"], cwd=folder).stdout.strip()
        remotes = run_git(["remote"], cwd=folder).stdout.split()
    except GitError:
        raise InputError(f"{folder} is not a git checkout: the CI workflow cannot name envbuild's source",
                         hint=SOURCE_HINT) from None
    name = "origin" if "origin" in remotes else (remotes[0] if len(remotes) == 1 else None)
    if name is None:
        raise InputError(f"envbuild's checkout {folder} has {len(remotes) or 'no'} git remotes"
                         + ("" if not remotes else f" ({', '.join(remotes)}) and none is origin"),
                         hint=SOURCE_HINT)
    return EnvbuildSource.from_remote(run_git(["remote", "get-url", name], cwd=folder).stdout.strip(), commit)


def regenerate_command(request: RenderRequest, rec, tgt, locked: bool) -> str:
    """The command a rendered file's header names: the recipe and every input as the user gave
    them; a lock found in ``$ENVBUILD_LOCKDIR`` (not given, not shipped) by its path, which a
    render elsewhere would not find."""
    from envbuild.inputs import lock_source
    from envbuild.lock.location import SHIPPED_LOCKDIR
    from envbuild.render.regenerate import render_command

    lock = request.lock_file
    if lock is None and locked:
        found = lock_source(rec, tgt).resolve()
        lock = None if found.is_relative_to(SHIPPED_LOCKDIR.resolve()) else str(found)
    return render_command(request.recipe or rec.name, tgt.name if request.target is None else request.target,
                          request.fmt, lock=lock, base=request.base, facts=request.facts_file,
                          wheelhouse=request.wheelhouse, allow_unverified=request.allow_unverified)


def render(request: RenderRequest) -> RenderOutcome:
    """Render and write (see the module docstring)."""
    from envbuild.inputs import find_lock, node_facts, recipe_and_target
    from envbuild.lock.serialize import image_lock_text
    from envbuild.plan.placeholders import inventory_values  # {inventory.*} patches: from --facts
    from envbuild.provision.replan import refuse_unverified
    from envbuild.render.context import write
    from envbuild.render.formats import IMAGE_FORMATS
    from envbuild.render.formats import render as render_format

    rec, tgt = recipe_and_target(request.recipe, request.target)
    lock = find_lock(rec, tgt, request.lock_file)
    lock_text = image_lock_text(lock, rec.name, tgt.name) if lock is not None else None
    facts = None if request.fmt in IMAGE_FORMATS else node_facts(tgt, request.facts_file)[0]
    inventory = inventory_values(node_facts(tgt, request.facts_file)) if request.facts_file else None
    folder = Path(request.out or f"containers/{rec.name}/{tgt.name}/{request.fmt}")
    res = render_format(request.fmt, rec, tgt, lock, lock_text=lock_text, facts=facts, base=request.base,
                        wheelhouse=request.wheelhouse, prefix=request.prefix,
                        run_dir=str((folder / "run").resolve()), cache_dir=str((folder / "cache").resolve()),
                        inventory=inventory, given=_ci_inputs(request, rec.name),
                        regenerate=regenerate_command(request, rec, tgt, lock is not None))
    refuse_unverified(res.plan, list(request.allow_unverified), lock, rec.python,  # before a file is written
                      tgt.platform.arch)
    written = write(res.context, folder, wheelhouse=Path(request.wheelhouse) if request.wheelhouse else None)
    return RenderOutcome(folder=folder, files=written, recipe=rec.name, target=tgt.name, feasible=res.feasible,
                         summary=res.summary, base=res.base, lock_sha256=res.plan.lock_digest)
