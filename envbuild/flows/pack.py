"""The pack flow: a provisioned environment packed into one file (``envbuild.bundle.envpack``),
its provenance signed beside it with a key (``envbuild.flows.signing``).

``pack(PackRequest(...)) -> PackOutcome``. The key is checked before anything is packed; an
unsigned pack written over a signed one removes the old envelope (it names the old bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envbuild.bundle import envpack
from envbuild.bundle.envpack import PackedEnv
from envbuild.flows.signing import beside, sign_provenance, signer


@dataclass(frozen=True)
class PackRequest:
    """The environment's ``prefix``, the pack to write (``output``), its format (``fmt``: None
    from the name), and ``sign_key`` with ``valid_days`` to sign its provenance."""

    prefix: Path
    output: Path
    fmt: str | None = None
    sign_key: Path | None = None
    valid_days: float | None = None


@dataclass(frozen=True)
class PackOutcome:
    """The pack written, its envelope (``provenance``, with a key) and the stale one removed."""

    packed: PackedEnv
    provenance: Path | None = None
    removed: Path | None = None

    def to_dict(self) -> dict:
        return {**self.packed.manifest(), "provenance": str(self.provenance) if self.provenance else None,
                "removed": [str(self.removed)] if self.removed else []}


def pack(request: PackRequest) -> PackOutcome:
    """Pack the prefix and sign (or clear) its provenance (see the module docstring)."""
    sig = signer(request.sign_key, request.valid_days)  # an unusable key is refused before anything is packed
    packed = envpack.pack(request.prefix, request.output, request.fmt)
    signed = sign_provenance(beside(Path(packed.archive)), sig,
                             lambda stamp: envpack.statement(packed, **stamp.fields()))
    return PackOutcome(packed, signed.provenance, signed.removed)
