"""``envbuild image-provenance``: sign, or verify, the provenance of an image built from a
rendered context (``envbuild.flows.image``)."""

from __future__ import annotations

from pathlib import Path

import click

from envbuild.cli import cli
from envbuild.cli.options import valid_days as _days, valid_days_option
from envbuild.cli.output import emit_json


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
    from envbuild.display import visible
    from envbuild.flows.image import ImageRequest, image_provenance

    days = _days(valid_days, sign_key)
    outcome = image_provenance(ImageRequest(image=image, engine=engine, context=context, sign_key=sign_key,
                                            output=output, valid_days=days, verify_file=verify_file,
                                            trusted_keys=tuple(trusted_keys)))
    if as_json:
        emit_json(outcome.statement)
        return
    if verify_file is not None:
        click.echo(visible(f"{image}: signed by a trusted key; image ID sha256:{outcome.image_id}"))
        click.echo(visible("made from: " + ", ".join(f"{k} {v}" for k, v in outcome.parameters.items())))
        return
    click.echo(visible(f"{output}: the provenance of {image} (image ID sha256:{outcome.image_id}), signed; "
                       f"{outcome.context_files} context file(s) by sha256"))
