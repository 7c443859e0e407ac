"""Re-locking with uv's semantics: keep every pin of the existing lock unless asked (pure).

``uv lock`` and ``uv pip compile -o FILE`` prefer the versions already in their output: a change
to one requirement moves that requirement (and what it forces), not the rest of the closure;
``--upgrade`` drops every preference and ``--upgrade-package NAME`` drops one. ``preferences``
turns an existing lock into those preferences; ``pin_changes`` says, after the resolution, which
pins moved and why, so that a one-pin edit is seen to move one pin (an image rebuilt from the
lock then reuses every layer before that package's).
"""

from __future__ import annotations

from dataclasses import dataclass

from envbuild.lock.schema import Lock, LockedPackage, normalize


@dataclass(frozen=True)
class Upgrade:
    """What the user asked to move: everything (``--upgrade``) or the named packages."""

    everything: bool = False
    packages: frozenset[str] = frozenset()  # normalized names (--upgrade-package)

    @classmethod
    def of(cls, everything: bool, packages: tuple[str, ...] | list[str]) -> Upgrade:
        return cls(everything, frozenset(normalize(p) for p in packages))


def preferences(old: Lock | None, upgrade: Upgrade) -> dict[str, str]:
    """``{normalized name: version}`` uv should keep: every package the old lock resolved
    (preinstalled ones are not uv's to pick), less what ``upgrade`` names. A preference is not
    a constraint: a recipe whose new spec excludes the kept version gets another one."""
    if old is None or upgrade.everything:
        return {}
    return {normalize(p.name): p.version for p in old.packages
            if p.source != "preinstalled" and normalize(p.name) not in upgrade.packages}


@dataclass(frozen=True)
class PinChange:
    name: str
    old: str | None  # None: added
    new: str | None  # None: removed
    why: str

    def line(self) -> str:
        if self.old is None:
            return f"{self.name} {self.new} added ({self.why})"
        if self.new is None:
            return f"{self.name} {self.old} removed ({self.why})"
        return f"{self.name} {self.old} -> {self.new} ({self.why})"

    def as_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "old": self.old, "new": self.new, "why": self.why}


def _why(name: str, new: LockedPackage | None, old: LockedPackage | None, upgrade: Upgrade) -> str:
    key = normalize(name)
    if upgrade.everything:
        return "--upgrade"
    if key in upgrade.packages:
        return "--upgrade-package"
    if new is not None and new.requested is not None and (old is None or old.requested != new.requested):
        return f"the recipe asks {new.requested}"
    if old is not None and new is None:
        if old.requested is not None:
            return "the recipe no longer names it"
        return "no locked package requires it any more"
    by = ", ".join(new.required_by) if new is not None and new.required_by else None
    if old is None:
        return f"required by {by}" if by else "newly required"
    if old.source != new.source:
        return f"its source changed: {old.source} -> {new.source}"
    return f"required by {by}, whose new pin needs it" if by else "uv could not keep the old pin"


def pin_changes(old: Lock | None, new: Lock, upgrade: Upgrade) -> list[PinChange]:
    """Every package whose pin differs between ``old`` and ``new`` (name order), with why."""
    if old is None:
        return []
    before = {normalize(p.name): p for p in old.packages}
    after = {normalize(p.name): p for p in new.packages}
    out = []
    for key in sorted(before.keys() | after.keys()):
        o, n = before.get(key), after.get(key)
        if o is not None and n is not None and o.version == n.version and o.source == n.source:
            continue
        out.append(PinChange((n or o).name, o.version if o else None, n.version if n else None,
                             _why((n or o).name, n, o, upgrade)))
    return out
