"""The port flow: a published recipe moved to the nodes at hand, as a variant recipe.

``port(PortRequest(...)) -> PortOutcome``: the recipe and the node (a target's profile, or a
facts file completed by the target), the stack (``envbuild.port.stack``), the variant composed
(``envbuild.port.compose``: packages, Apex, the known fixes read from the pinned trees in the
git mirror, what cannot be decided), validated by envbuild's recipe loader, then written to
``out`` (or returned for stdout). Nothing is installed, locked or run; the next steps (lock,
check, import proof) are returned as commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class PortRequest:
    """``recipe`` (a name or a file) for ``target`` (a name; None with ``facts`` alone: the
    ``local`` target), ``facts`` a facts file, ``out`` the file to write (None: the caller
    prints the text), ``git_mirror`` the mirror folder (None: the fixes are left undecided)."""

    recipe: str
    target: str | None = None
    facts: str | None = None
    out: str | None = None
    git_mirror: str | None = None


@dataclass(frozen=True)
class PortOutcome:
    """The variant: its name, the stack, the patches and deviations it carries, what is left
    undecided, the file written (or None) with its YAML text, and the commands to run next."""

    name: str
    variant_of: str
    target: str
    stack: str
    out: Path | None
    text: str
    fixes: list[dict] = field(default_factory=list)  # {fix, component, file, line, count}
    deviations: list[str] = field(default_factory=list)
    undecided: list[dict] = field(default_factory=list)
    apex: str | None = None
    unread: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"recipe": self.name, "variant_of": self.variant_of, "target": self.target, "stack": self.stack,
                "apex": self.apex, "out": str(self.out) if self.out else None, "fixes": self.fixes,
                "deviations": self.deviations, "undecided": self.undecided, "unread": self.unread,
                "notes": self.notes, "next_steps": self.next_steps, **({} if self.out else {"text": self.text})}


def _raw(recipe_arg: str) -> dict:
    """The published recipe's data as written (a shipped name or a file)."""
    from envbuild import catalog
    from envbuild.recipes import DATA
    from envbuild.yamlsrc import load_yaml

    path = catalog.shipped(DATA).get(recipe_arg) or Path(recipe_arg)
    return load_yaml(path)[0]


def _dump(data: dict) -> str:
    """YAML as the shipped recipes read: text with line breaks (a patch's old and new) as
    literal blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True, default_flow_style=False)


def _next_steps(name: str, where: str, target: str, mirror: str | None, facts: str | None) -> list[str]:
    m = f" --git-mirror {mirror}" if mirror else " --git-mirror DIR"
    f = f" --facts {facts}" if facts else ""
    return [f"envbuild check {where} --target {target}{f}",
            f"envbuild lock {where} --target {target}{m}",
            f"envbuild imports {where}{m}",
            (f"pytest -m proof tests/testbed/test_import_proof.py -k {name}  (the CPU import proof, once {where} is "
             "among the recipes: envbuild/recipes/data/)")]


def port(request: PortRequest) -> PortOutcome:
    """See module. InputError for a bad recipe, target, facts file or mirror; CheckFailed when
    no torch build or Apex commit of envbuild's tables fits the node."""
    from envbuild.errors import InputError
    from envbuild.fsio import write_atomic
    from envbuild.inputs import node_facts
    from envbuild.lock.location import git_mirror_dir
    from envbuild.port.compose import compose
    from envbuild.port.stack import choose_stack
    from envbuild.recipes import load_recipe
    from envbuild.recipes.schema import Recipe
    from envbuild.targets import load_target
    from envbuild.yamlsrc import load_yaml, validate

    if not request.target and not request.facts:
        raise InputError("port needs the nodes: --target T or --facts FILE",
                         hint="e.g. envbuild port alpa-megatron --target h100-venv --git-mirror /srv/mirrors")
    recipe = load_recipe(request.recipe)
    target = load_target(request.target or "local")
    facts = node_facts(target, request.facts)[0]
    mirror = git_mirror_dir(request.git_mirror)
    stack = choose_stack(recipe, target, facts)
    p = compose(recipe, _raw(request.recipe), target, facts, stack, mirror)
    header = (f"# Drafted by envbuild port from {recipe.name} for {target.name}: review every deviation and\n"
              f"# settle every undecided entry before use (envbuild check refuses it while any is left).\n")
    text = header + _dump(p.data)
    where = request.out or f"<port of {recipe.name}>"
    data, loc = load_yaml(where, text)
    validate(Recipe, data, where, loc)  # the loader's own check: a variant that does not load is a bug
    out = write_atomic(Path(request.out), text) if request.out else None
    apex = next((s for s in p.data.get("sources", []) if s.get("install") == "apex"), None)
    return PortOutcome(
        name=p.data["name"], variant_of=recipe.name, target=target.name, stack=stack.label(), out=out, text=text,
        fixes=[{"fix": h.fix.id, "component": h.component, "file": h.file, "line": h.line, "count": h.count}
               for h in p.found.hits],
        deviations=[d["id"] for d in p.deviations], undecided=list(p.undecided),
        apex=apex["sha"] if apex else None, unread=dict(p.found.unread), notes=p.notes,
        next_steps=_next_steps(p.data["name"], request.out or "FILE", target.name, request.git_mirror, request.facts))
