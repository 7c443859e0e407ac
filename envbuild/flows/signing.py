"""Signing an artifact's provenance, the same way for every command that signs (bundle, pack,
report, image-provenance): one place that checks the key, stamps the statement and writes its
envelope.

``signer(key, valid_days)`` refuses an unusable private key before anything is made (InputError,
exit 2) and notes when the making started. Once the artifact is whole,
``sign_provenance(envelope, signer, statement)`` removes the envelope already at ``envelope``
first (it names the artifact this one replaces), then, with a key, builds the statement from
the ``Stamp`` (envbuild's version and checkout commit, started and finished, how long it holds),
signs it (``envbuild.bundle.provenance``: an in-toto statement in a DSSE envelope, Ed25519) and
writes it there. ``beside(artifact)`` is where an envelope lies by default: ``ARTIFACT.intoto.jsonl``.

Example (``statement`` builds the kind's statement from ``**stamp.fields()``)::

    s = signer(Path("maker"), 90)           # before packing: a bad key stops here
    signed = sign_provenance(beside(out), s, lambda stamp: envpack.statement(packed, **stamp.fields()))
    signed.provenance, signed.removed       # the envelope written; one removed and not replaced
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from envbuild.bundle import provenance as P


@dataclass(frozen=True)
class Signer:
    """A usable private ``key`` (None: nothing is signed, a stale envelope is still removed),
    how long its statements hold, and when the making of the artifact ``started``."""

    key: Path | None
    valid_days: float
    started: str


@dataclass(frozen=True)
class Stamp:
    """What every statement says of its making (the keywords of ``provenance.statement``)."""

    envbuild_version: str
    envbuild_commit: str | None
    started: str
    finished: str
    valid_days: float

    def fields(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Signed:
    """The envelope written and the statement it signs (None without a key), and the stale
    envelope removed and not replaced."""

    provenance: Path | None = None
    removed: Path | None = None
    statement: dict | None = None


def signer(key: Path | str | None, valid_days: float | None = None) -> Signer:
    """The signer of ``key``, refused (InputError) when it is no usable Ed25519 private key;
    its statements hold ``valid_days`` (None: ``provenance.DEFAULT_VALID_DAYS``)."""
    if key:
        P.load_key(Path(key), private=True)
    days = P.DEFAULT_VALID_DAYS if valid_days is None else valid_days
    return Signer(Path(key) if key else None, days, P.utc_now())


def beside(artifact: Path) -> Path:
    """The envelope of ``artifact`` where it lies by default: ``ARTIFACT.intoto.jsonl``."""
    return P.envelope_path(artifact)


def sign_provenance(envelope: Path, signer: Signer, statement: Callable[[Stamp], dict]) -> Signed:
    """Remove a stale envelope at ``envelope``, then with a key sign ``statement(stamp)`` there."""
    from envbuild import __version__
    from envbuild.shipped import checkout_commit

    # first: the artifact beside it is already the new one, so an envelope left by an error or an
    # interrupt while the statement is made would vouch for the artifact it replaced
    stale = envelope.is_file()
    if stale:
        envelope.unlink()
    if signer.key is None:
        return Signed(removed=envelope if stale else None)
    stamp = Stamp(__version__, checkout_commit(), signer.started, P.utc_now(), signer.valid_days)
    stmt = statement(stamp)
    return Signed(provenance=P.write_envelope(envelope, P.sign(stmt, signer.key), path=envelope), statement=stmt)
