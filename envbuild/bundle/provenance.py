"""Provenance of a bundle from outside it: an in-toto statement with a SLSA provenance predicate,
signed with a key the user holds, checked before a byte of the bundle is unpacked.

``statement`` (pure) says what was built (the bundle file: its name and sha256) and from what
(the recipe, target and lock files by sha256, every pinned commit, envbuild's version and the
commit of its checkout). ``sign`` wraps it in a DSSE envelope (the in-toto attestation
framework's signature envelope: the signature covers the pre-authentication encoding of the
payload type and payload) signed with an Ed25519 key (PEM/PKCS#8 or OpenSSH, as ``ssh-keygen
-t ed25519`` writes it); ``verify`` takes the user's trusted public keys and refuses an
envelope no trusted key signed, a payload that is not such a statement, and a bundle file whose
sha256 is not the statement's subject, or whose name is not the subject's (a statement binds
the artifact's name, its digest, and, for a bundle, its lock digest and creation time:
``envbuild.bundle.rollback`` refuses one older than the newest accepted). A statement also binds
its expiry (``runDetails.metadata.envbuild_expiresOn``: ``DEFAULT_VALID_DAYS`` after it was
made unless the signer says otherwise, ``--valid-days``): ``verify`` refuses an expired one, and
one that states none, as a TUF client refuses expired metadata (CheckFailed, exit 1), so a
mirror cannot serve a statement forever. Nothing here reaches the network: a Sigstore bundle
(Fulcio certificate, Rekor entry) needs both, so it is not made here (said in docs/provision.md).

Formats: https://github.com/in-toto/attestation (Statement v1, DSSE envelope),
https://slsa.dev/spec/v1.0/provenance (the predicate), https://github.com/secure-systems-lab/dsse
(protocol.md: PAE).
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from envbuild.errors import CheckFailed, InputError
from envbuild.fsio import sha256_bytes, sha256_file

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
BUILD_TYPE = "urn:envbuild:bundle:v1"  # what the predicate's build definition means: `envbuild bundle`
REPORT_BUILD_TYPE = "urn:envbuild:report:v1"  # `envbuild report -o FILE --sign-key KEY`: a run's report
PACK_BUILD_TYPE = "urn:envbuild:pack:v1"  # `envbuild pack ... --sign-key KEY`: a packed environment
IMAGE_BUILD_TYPE = "urn:envbuild:image:v1"  # `envbuild image-provenance`: an image built from a rendered context
BUILD_TYPES = {"bundle": BUILD_TYPE, "report": REPORT_BUILD_TYPE, "pack": PACK_BUILD_TYPE, "image": IMAGE_BUILD_TYPE}
# per kind of artifact: the command that signs it, and what a refusal means for the reader
MADE_BY = {"bundle": ("`envbuild bundle ... --sign-key KEY`", "nothing was unpacked"),
           "report": ("`envbuild report RUN -o FILE --sign-key KEY`", "do not trust this report"),
           "pack": ("`envbuild pack --prefix P -o FILE --sign-key KEY`", "nothing was submitted"),
           "image": ("`envbuild image-provenance IMAGE --context DIR --sign-key KEY -o FILE`",
                     "do not run this image")}
SUFFIX = ".intoto.jsonl"  # the envelope beside the bundle: <bundle>.intoto.jsonl
# how long a statement is valid unless its signer says otherwise (--valid-days): TUF's reference
# implementation gives its targets metadata 3 months
DEFAULT_VALID_DAYS = 90
# where a statement states its expiry: runDetails.metadata, beside startedOn and finishedOn, as an
# extension field (the in-toto attestation framework names them <vendor>_<field>)
EXPIRES = "envbuild_expiresOn"
STAMP = "%Y-%m-%dT%H:%M:%SZ"
MAX_ENVELOPE = 4 * 2**20  # an envelope is a few KB; a larger file is not read


def envelope_path(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + SUFFIX)


def statement(bundle_name: str, bundle_sha256: str, *, recipe: str, target: str, lock_digest: str,
              inputs: dict[str, str], git: list[tuple[str, str]], envbuild_version: str,
              envbuild_commit: str | None, started: str, finished: str, build_type: str = BUILD_TYPE,
              parameters: dict | None = None, valid_days: float = DEFAULT_VALID_DAYS) -> dict:
    """The in-toto statement of one bundle (pure), or of another artifact envbuild made from a
    run (``build_type``: a report). ``inputs``: file name -> sha256 of the files it was made
    from (the recipe, target and lock; a report's run records); ``git``: (url, commit) of every
    pinned source; ``parameters``: more external parameters (a report's run and verdict);
    ``valid_days``: how long after ``finished`` it expires (``valid_until``)."""
    deps = [{"name": name, "digest": {"sha256": sha}} for name, sha in sorted(inputs.items())]
    deps += [{"uri": f"git+{url}", "digest": {"gitCommit": sha}} for url, sha in sorted(set(git))]
    builder = {"id": f"urn:envbuild:{envbuild_version}"}
    if envbuild_commit:
        builder["version"] = {"envbuild": f"{envbuild_version} ({envbuild_commit})"}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": bundle_name, "digest": {"sha256": bundle_sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": build_type,
                "externalParameters": {"recipe": recipe, "target": target, "lockDigest": lock_digest,
                                       **(parameters or {})},
                "internalParameters": {"envbuildVersion": envbuild_version,
                                       **({"envbuildCommit": envbuild_commit} if envbuild_commit else {})},
                "resolvedDependencies": deps,
            },
            "runDetails": {"builder": builder, "metadata": {"startedOn": started, "finishedOn": finished,
                                                            EXPIRES: valid_until(finished, valid_days)}},
        },
    }


def valid_until(made: str, days: float) -> str:
    """The time stamp ``days`` after ``made`` (a statement's time stamp; now where it is none)."""
    try:
        start = datetime.strptime(made, STAMP).replace(tzinfo=timezone.utc)
    except ValueError:
        start = datetime.now(timezone.utc)
    return (start + timedelta(days=days)).strftime(STAMP)


def expiry(stmt: dict, now: datetime | None = None) -> datetime:
    """When the statement expires; CheckFailed (exit 1) when it has expired at ``now`` (default:
    the clock's), or states no expiry (a statement made before expiries, or not by envbuild)."""
    meta = stmt.get("predicate", {}).get("runDetails", {}).get("metadata", {})
    raw = meta.get(EXPIRES) if isinstance(meta, dict) else None
    try:
        when = datetime.strptime(str(raw), STAMP).replace(tzinfo=timezone.utc)
    except ValueError:
        raise CheckFailed(f"the signed statement states no expiry ({EXPIRES} {raw!r})",
                          hint="a statement without one would vouch forever: ask its maker to sign it again with "
                               "this envbuild") from None
    now = now or datetime.now(timezone.utc)
    if now >= when:
        made = meta.get("finishedOn", "at a time it does not state")
        raise CheckFailed(f"the signed statement expired at {raw} (made {made}; it is now {now.strftime(STAMP)})",
                          hint="an expired statement vouches for nothing, however valid its signature: ask its maker "
                               "for a newer one (signed with --valid-days DAYS to set how long it holds)")
    return when


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what a signature covers."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def load_key(path: Path, private: bool):
    """An Ed25519 key from a PEM or OpenSSH file; InputError naming the file otherwise."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"key {path}: {exc.strerror or exc}", hint="give the path of an Ed25519 key file") from None
    loaders = ((serialization.load_pem_private_key, serialization.load_ssh_private_key) if private
               else (serialization.load_pem_public_key, serialization.load_ssh_public_key))
    key = None
    for load in loaders:
        try:
            key = load(data, None) if private else load(data)
            break
        except Exception:  # noqa: BLE001 - every format tried in turn
            continue
    wanted = Ed25519PrivateKey if private else Ed25519PublicKey
    if not isinstance(key, wanted):
        what = "private" if private else "public"
        raise InputError(f"key {path}: not an Ed25519 {what} key (PEM or OpenSSH)",
                         hint="make one with `ssh-keygen -t ed25519 -N '' -f KEY` (KEY signs, KEY.pub verifies)")
    return key


def key_id(public_key) -> str:
    """sha256 of the raw public key, hex: the envelope's keyid."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sha256_bytes(raw)


def sign(stmt: dict, private_key_file: Path) -> dict:
    """The DSSE envelope of ``stmt`` signed with the key in ``private_key_file``."""
    key = load_key(private_key_file, private=True)
    payload = json.dumps(stmt, sort_keys=True, separators=(",", ":")).encode()
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    return {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode(),
            "signatures": [{"keyid": key_id(key.public_key()), "sig": base64.b64encode(sig).decode()}]}


def verify(bundle: Path, envelope_file: Path, trusted: list[Path], kind: str = "bundle",
           actual: str | None = None, now: datetime | None = None) -> dict:
    """The statement of ``bundle`` (or of another artifact of ``kind``: a report), once a key of
    ``trusted`` is shown to have signed it, it has not expired (``expiry``, at ``now``) and its
    subject is the file's sha256 and name (CheckFailed otherwise, exit 1: a statement of another
    file vouches for nothing here). Reads the file only to hash it; ``actual``: the artifact's
    sha256 as found elsewhere (an image's ID, from its engine), ``bundle`` then only names it,
    and the name is not compared."""
    made_by, refused = MADE_BY[kind]
    from cryptography.exceptions import InvalidSignature

    keys = {key_id(k): k for k in (load_key(p, private=False) for p in trusted)}
    if not envelope_file.is_file():
        raise CheckFailed(f"no provenance for {bundle.name}: {envelope_file} does not exist",
                          hint=f"the {kind}'s maker writes it with {made_by}; {refused}")
    if envelope_file.stat().st_size > MAX_ENVELOPE:
        raise CheckFailed(f"{envelope_file}: {envelope_file.stat().st_size} bytes, not an envelope",
                          hint=refused)
    try:
        env = json.loads(envelope_file.read_text(encoding="utf-8").strip().splitlines()[0])
        payload = base64.b64decode(env["payload"], validate=True)
        signatures = [(s["keyid"], base64.b64decode(s["sig"], validate=True)) for s in env["signatures"]]
        payload_type = env["payloadType"]
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        raise CheckFailed(f"{envelope_file}: not a DSSE envelope", hint=refused) from None
    good = None
    for keyid, sig in signatures:
        key = keys.get(keyid)
        if key is None:
            continue
        try:
            key.verify(sig, pae(payload_type, payload))
            good = keyid
            break
        except InvalidSignature:
            continue
    if good is None:
        signers = ", ".join(k[:16] for k, _ in signatures) or "nobody"
        raise CheckFailed(f"{bundle.name}: its provenance is signed by {signers}, not by a trusted key "
                          f"({', '.join(k[:16] for k in keys)})",
                          hint=f"pass the public key of the {kind}'s maker with --trusted-key; {refused}")
    try:
        stmt = json.loads(payload)
        subject = stmt["subject"][0]["digest"]["sha256"]
        subject_name = str(stmt["subject"][0]["name"])
        ok_type = (payload_type == PAYLOAD_TYPE and stmt["_type"] == STATEMENT_TYPE
                   and stmt["predicateType"] == PREDICATE_TYPE
                   and stmt["predicate"]["buildDefinition"]["buildType"] == BUILD_TYPES[kind])
    except (ValueError, KeyError, TypeError, IndexError):
        ok_type, subject = False, None
    if not ok_type:
        raise CheckFailed(f"{envelope_file}: signed, but not an in-toto statement of SLSA provenance of a {kind}",
                          hint=refused)
    try:
        expiry(stmt, now)
    except CheckFailed as exc:
        raise CheckFailed(f"{bundle.name}: {exc.message}", hint=f"{exc.hint}; {refused}") from None
    named = actual is None
    actual = actual or sha256_file(bundle)
    if actual != subject:
        raise CheckFailed(f"{bundle.name}: its sha256 is {actual}, not the signed statement's {subject}",
                          hint=f"this is not the {kind} the key signed (changed or damaged); {refused}")
    if named and subject_name != bundle.name:
        from envbuild.display import visible

        raise CheckFailed(f"{bundle.name}: the signed statement names another file, '{visible(subject_name)}'",
                          hint=f"a statement vouches for the file it names: a renamed {kind} is not the one the key "
                               f"signed under this name; {refused}")
    return stmt


def write_envelope(bundle: Path, envelope: dict, path: Path | None = None) -> Path:
    """The envelope written whole at ``path``, by default beside the artifact (``envelope_path``)."""
    from envbuild.fsio import write_atomic

    return write_atomic(path or envelope_path(bundle), json.dumps(envelope, sort_keys=True) + "\n")


def utc_now() -> str:
    """A statement's time stamp: UTC to the second, ``2026-11-27T04:10:00Z``."""
    return datetime.now(timezone.utc).strftime(STAMP)
