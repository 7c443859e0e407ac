"""``envbuild image-provenance``: sign, or verify, the provenance of an image built from a
rendered context (``envbuild.bundle.imageprov``)."""

from __future__ import annotations

from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import valid_days as _days, valid_days_option
from envbuild.cli.output import emit_json
from envbuild.errors import InputError


@cli.command("image-provenance")
@click.argument("image")
@click.option("--context", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The folder envbuild render --format dockerfile wrote and the image was built from (to sign).")
@click.option("--sign-key", "sign_key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Ed25519 private key (PEM or OpenSSH) to sign the statement with.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the signed statement (with --sign-key).")
@valid_days_option
@click.option("--verify", "verify_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Check this signed statement against IMAGE instead of signing.")
@click.option("--trusted-key", "trusted_keys", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --verify: a public key whose signature you trust (repeatable).")
@click.option("--engine", type=click.Choice(["podman", "docker"]), default="podman", show_default=True,
              help="The local engine that holds IMAGE.")
@click.option("--json", "as_json", is_flag=True, help="Print the statement as JSON.")
def image_provenance_cmd(image, context, sign_key, output, verify_file, trusted_keys, engine, as_json,
                         valid_days=None):
    """Sign an image's provenance, or check it.

    \b
    Sign (the image must carry the labels the context's Dockerfile sets):
      envbuild render cpu-reference --format dockerfile -o ctx
      podman build -t cpu-ref:1 ctx
      envbuild image-provenance cpu-ref:1 --context ctx --sign-key key -o cpu-ref.intoto.jsonl
    Verify (exit 0 only when a trusted key signed it and the engine's image has its ID now):
      envbuild image-provenance cpu-ref:1 --verify cpu-ref.intoto.jsonl --trusted-key key.pub
    Exit codes: 1 not built from that context, or not signed by a trusted key, or another image;
    2 bad input; 3 the engine cannot show the image.
    """
    from envbuild.bundle import imageprov as I, provenance as P
    from envbuild.display import visible

    days = _days(valid_days, sign_key)
    if verify_file is not None:
        if not trusted_keys or sign_key or context or output:
            raise InputError("--verify takes --trusted-key KEY.pub, and none of --context, --sign-key, -o",
                             hint="envbuild image-provenance IMAGE --verify FILE --trusted-key KEY.pub")
        found = I.inspect(image, engine)
        stmt = P.verify(Path(image), verify_file, list(trusted_keys), kind="image", actual=found.id)
        if as_json:
            emit_json(stmt)
            return
        params = stmt["predicate"]["buildDefinition"]["externalParameters"]
        click.echo(visible(f"{image}: signed by a trusted key; image ID sha256:{found.id}"))
        click.echo(visible("made from: " + ", ".join(f"{k} {v}" for k, v in params.items())))
        return
    if not (context and sign_key and output):
        raise InputError("signing needs --context DIR, --sign-key KEY and -o FILE (or --verify FILE to check)",
                         hint="envbuild image-provenance IMAGE --context DIR --sign-key KEY -o FILE")
    if trusted_keys:
        raise InputError("--trusted-key goes with --verify", hint="drop it when signing")
    from envbuild import __version__
    from envbuild.shipped import checkout_commit

    dockerfile = context / "Dockerfile"
    if not dockerfile.is_file():
        raise InputError(f"{context}: no Dockerfile", hint="envbuild render RECIPE --format dockerfile -o DIR")
    P.load_key(sign_key, private=True)  # an unusable key is refused before anything is read
    started = P.utc_now()
    found = I.inspect(image, engine)
    I.check_built_from(found, dockerfile.read_text(errors="replace"), str(context))
    stmt = I.statement(found, I.context_files(context), envbuild_version=__version__,
                       envbuild_commit=checkout_commit(), started=started, finished=P.utc_now(), valid_days=days)
    P.write_envelope(output, P.sign(stmt, sign_key), path=output)
    if as_json:
        emit_json(stmt)
        return
    click.echo(visible(f"{output}: the provenance of {image} (image ID sha256:{found.id}), signed; "
                       f"{len(stmt['predicate']['buildDefinition']['resolvedDependencies'])} context file(s) by sha256"))
