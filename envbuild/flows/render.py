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
    ``wheelhouse``, and the packages accepted without a verified hash."""

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
        return None
    recipe = request.recipe if request.recipe and not Path(request.recipe).is_file() else None
    given = CiInputs(recipe=recipe or in_repo(request.recipe, "the recipe") or name,
                     lock=in_repo(request.lock_file, "the lock"), base=request.base)
    for value in (given.recipe, given.lock, given.base):
        if value and ("${{" in value or any(c in value for c in "\n\r")):  # Actions evaluates ${{ }} in run:
            raise InputError(f"{value!r} cannot go into a workflow's command (an Actions expression or a line break)",
                             hint="rename the file, or render --format dockerfile and write the workflow yourself")
    return given


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
                        inventory=inventory, given=_ci_inputs(request, rec.name))
    refuse_unverified(res.plan, list(request.allow_unverified), lock, rec.python,  # before a file is written
                      tgt.platform.arch)
    written = write(res.context, folder, wheelhouse=Path(request.wheelhouse) if request.wheelhouse else None)
    return RenderOutcome(folder=folder, files=written, recipe=rec.name, target=tgt.name, feasible=res.feasible,
                         summary=res.summary, base=res.base, lock_sha256=res.plan.lock_digest)
