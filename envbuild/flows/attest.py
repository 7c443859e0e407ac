"""The attest flow: an artifact's signed provenance checked offline (``envbuild.bundle.provenance``).

``attest(AttestRequest(...)) -> AttestOutcome``: the statement, once a trusted key is shown to
have signed it, it has not expired and its subject is this file (its sha256 and name);
CheckFailed (exit 1) otherwise, or when it is no in-toto statement of that ``kind`` (a report,
a bundle or a pack). The outcome's fields are the signer's text: the caller shows them escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AttestRequest:
    """The ``artifact``, the public keys trusted to sign it, its envelope (``provenance``; None:
    ``ARTIFACT.intoto.jsonl``) and what it is (``kind``: report, bundle or pack)."""

    artifact: Path
    trusted_keys: tuple[Path, ...]
    provenance: Path | None = None
    kind: str = "report"


@dataclass(frozen=True)
class AttestOutcome:
    """The verified statement, and what it says, read from it."""

    statement: dict

    @property
    def subject(self) -> dict:
        """The file it names: ``name`` and ``digest.sha256``."""
        return self.statement["subject"][0]

    @property
    def parameters(self) -> dict:
        """What it was made from: recipe, target, lock digest (a report's run and verdict...)."""
        return self.statement["predicate"]["buildDefinition"]["externalParameters"]

    @property
    def inputs(self) -> int:
        """How many files it names by sha256."""
        return len(self.statement["predicate"]["buildDefinition"]["resolvedDependencies"])

    @property
    def builder(self) -> str:
        return self.statement["predicate"]["runDetails"]["builder"]["id"]

    @property
    def finished(self) -> str:
        """When it was made (``finishedOn``), "not recorded" where it says nothing."""
        return self._metadata.get("finishedOn", "not recorded")

    @property
    def expires(self) -> str | None:
        """When it expires (``provenance.EXPIRES``)."""
        from envbuild.bundle.provenance import EXPIRES

        return self._metadata.get(EXPIRES)

    @property
    def _metadata(self) -> dict:
        return self.statement["predicate"].get("runDetails", {}).get("metadata", {})


def attest(request: AttestRequest) -> AttestOutcome:
    """Check the artifact's signed provenance (see the module docstring)."""
    from envbuild.bundle import provenance as P

    envelope = request.provenance or P.envelope_path(request.artifact)
    return AttestOutcome(P.verify(request.artifact, envelope, list(request.trusted_keys), kind=request.kind))
