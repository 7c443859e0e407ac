"""The published recipe's own ``undecided:`` entries, carried into the variant where port does
not decide them.

A recipe ``envbuild draft`` wrote keeps what its repository does not say (the benchmark, the
data, a dependency's commit) under ``undecided:``. Port answers some of those questions itself:
the Python and the targets (the stack and ``--target``), the environment (a venv on the node),
torch's CUDA variant (the stack's torch replaces the published one) and the Apex commit (the
Apex rows). Every other entry stays undecided in the variant, so ``envbuild check`` refuses it
as it refused the published recipe; an entry naming ``packages[i]`` or ``sources[i]`` is moved to
that package's or source's index in the variant, and dropped (with a note) where the variant
no longer has it.
"""

from __future__ import annotations

import re

from envbuild.port.environment import same_torch
from envbuild.port.state import Port

ITEM = re.compile(r"^(packages|sources)\[(\d+)\](.*)$")


def _settled(p: Port, field: str, item: dict | None) -> str | None:
    """Why port itself decides ``field`` (None: it does not)."""
    top = re.split(r"[.\[]", field, maxsplit=1)[0]
    if top in ("python", "targets"):
        return f"{top}: the stack's ({p.stack.label()}) and --target {p.target.name}"
    if top == "environment":
        return "environment: a venv on the node (the environment deviation)"
    if item is not None and top == "packages" and item.get("name", "").lower() == "torch" \
            and field.endswith(".cuda") and not same_torch(p):
        return f"torch's CUDA variant: the stack's torch ({p.stack.label()}) replaces the published one"
    if item is not None and top == "sources" and item.get("install") == "apex" and field.endswith(".sha"):
        return "Apex's commit: chosen by the Apex rows (envbuild/port/apex.py)"
    return None


def port_undecided(p: Port) -> None:
    """Carry each published undecided entry port does not decide (see module)."""
    for u in p.recipe.undecided:
        m = ITEM.match(u.field)
        published = None
        field = u.field
        if m:
            rows = [x.model_dump() for x in getattr(p.recipe, m.group(1))]
            index = int(m.group(2))
            published = rows[index] if index < len(rows) else None
        why = _settled(p, u.field, published)
        if why is not None:
            p.notes.append(f"published undecided {u.field} decided by port ({why})")
            continue
        if m and published is not None:
            names = [x.get("name") for x in p.data.get(m.group(1), [])]
            if published["name"] not in names:
                p.notes.append(f"published undecided {u.field} dropped: {published['name']} is not in the variant")
                continue
            field = f"{m.group(1)}[{names.index(published['name'])}]{m.group(3)}"
        p.leave(field, f"{u.why} (undecided in {p.recipe.name}; port does not decide it)")
