"""The image-provenance flow: the provenance of an image built from a context envbuild rendered,
signed (``envbuild.flows.signing``) or checked (``envbuild.bundle.imageprov``).

``image_provenance(ImageRequest(...)) -> ImageOutcome``. With ``verify_file``: the engine's
image ``IMAGE`` now, and a statement a trusted key signed naming its ID (CheckFailed, exit 1,
otherwise). Else signing: the image must carry the ``io.envbuild.*`` labels the context's
Dockerfile sets; the statement names the image's ID and every file of the context by sha256,
and is written at ``output``. Options that do not go together are bad input (InputError, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import InputError
from envbuild.flows.signing import sign_provenance, signer


@dataclass(frozen=True)
class ImageRequest:
    """The ``image`` as ``engine`` names it; to sign, the ``context`` it was built from, the
    ``sign_key``, the statement's ``output`` and ``valid_days``; to check, ``verify_file`` and
    the ``trusted_keys``."""

    image: str
    engine: str = "podman"
    context: Path | None = None
    sign_key: Path | None = None
    output: Path | None = None
    valid_days: float | None = None
    verify_file: Path | None = None
    trusted_keys: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ImageOutcome:
    """The statement signed or verified, the image's ID (hex sha256), and where the signed
    statement was written (None when verifying)."""

    statement: dict
    image_id: str
    output: Path | None = None

    @property
    def parameters(self) -> dict:
        return self.statement["predicate"]["buildDefinition"]["externalParameters"]

    @property
    def context_files(self) -> int:
        return len(self.statement["predicate"]["buildDefinition"]["resolvedDependencies"])


def image_provenance(request: ImageRequest) -> ImageOutcome:
    """Check or sign the image's provenance (see the module docstring)."""
    from envbuild.bundle import imageprov as I, provenance as P

    r = request
    if r.verify_file is not None:
        if not r.trusted_keys or r.sign_key or r.context or r.output:
            raise InputError("--verify takes --trusted-key KEY.pub, and none of --context, --sign-key, -o",
                             hint="envbuild image-provenance IMAGE --verify FILE --trusted-key KEY.pub")
        found = I.inspect(r.image, r.engine)
        stmt = P.verify(Path(r.image), r.verify_file, list(r.trusted_keys), kind="image", actual=found.id)
        return ImageOutcome(stmt, found.id)
    if not (r.context and r.sign_key and r.output):
        raise InputError("signing needs --context DIR, --sign-key KEY and -o FILE (or --verify FILE to check)",
                         hint="envbuild image-provenance IMAGE --context DIR --sign-key KEY -o FILE")
    if r.trusted_keys:
        raise InputError("--trusted-key goes with --verify", hint="drop it when signing")
    dockerfile = r.context / "Dockerfile"
    if not dockerfile.is_file():
        raise InputError(f"{r.context}: no Dockerfile", hint="envbuild render RECIPE --format dockerfile -o DIR")
    sig = signer(r.sign_key, r.valid_days)  # an unusable key is refused before anything is read
    found = I.inspect(r.image, r.engine)
    I.check_built_from(found, dockerfile.read_text(errors="replace"), str(r.context))
    files = I.context_files(r.context)
    signed = sign_provenance(r.output, sig, lambda stamp: I.statement(found, files, **stamp.fields()))
    assert signed.statement is not None  # signed with a key
    return ImageOutcome(signed.statement, found.id, r.output)
