"""The draft flow: a published repository at one ref, read statically, as a recipe skeleton.

``draft(DraftRequest(...)) -> DraftOutcome``: the source opened (a local repository, or a URL
found in the git mirror folder), the ref resolved to a commit, the tree surveyed
(``envbuild.draft.survey``: git show / ls-tree only, nothing of the repository runs), the
recipe composed (``envbuild.draft.compose``), validated by envbuild's recipe loader, then
written to ``out`` (or returned for stdout).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class DraftRequest:
    """``source`` (a path or a URL) at ``ref``; ``out`` the file to write (None: the caller
    prints the text); ``git_mirror`` the mirror folder; ``name`` the recipe's name (default:
    the repository's name)."""

    source: str
    ref: str
    out: str | None = None
    git_mirror: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class DraftOutcome:
    """What was drafted: the recipe's name, the commit, the file written (or None), the YAML
    text, the undecided fields, and the counts of what was read."""

    name: str
    url: str
    ref: str
    commit: str
    out: Path | None
    text: str
    undecided: list[dict] = field(default_factory=list)
    packages: int = 0
    sources: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"recipe": self.name, "url": self.url, "ref": self.ref, "commit": self.commit,
                "out": str(self.out) if self.out else None, "packages": self.packages, "sources": self.sources,
                "undecided": self.undecided, "notes": self.notes,
                **({} if self.out else {"text": self.text})}


def draft(request: DraftRequest) -> DraftOutcome:
    """See module. InputError for a bad source, ref or name; EnvironmentProblem when a URL's
    mirror is missing."""
    from envbuild.draft.compose import compose, plain_name
    from envbuild.draft.gitread import open_source
    from envbuild.draft.survey import survey
    from envbuild.errors import InputError
    from envbuild.fsio import write_atomic
    from envbuild.names import NAME_RULE, is_name
    from envbuild.recipes.schema import Recipe
    from envbuild.yamlsrc import load_yaml, validate

    if request.name is not None and not is_name(request.name):
        raise InputError(f"--name {request.name!r} is not a recipe name", hint=f"use {NAME_RULE}")
    tree, url = open_source(request.source, request.ref, request.git_mirror)
    name = request.name or plain_name(url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
    found = survey(tree, request.git_mirror)
    drafted = compose(found, url, request.ref, name)
    where = request.out or f"<draft of {url}>"
    data, loc = load_yaml(where, drafted.text)
    validate(Recipe, data, where, loc)  # the loader's own check: a draft that does not load is a bug
    out = None
    if request.out:
        out = write_atomic(Path(request.out), drafted.text)
    return DraftOutcome(name=name, url=url, ref=request.ref, commit=tree.commit, out=out, text=drafted.text,
                        undecided=drafted.undecided, packages=len(drafted.recipe.get("packages", [])),
                        sources=len(drafted.recipe.get("sources", [])), notes=drafted.notes)
