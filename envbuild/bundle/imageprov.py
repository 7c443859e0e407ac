"""Provenance of a container image built from a context envbuild rendered (issue 41): an in-toto
statement whose subject is the image's ID (the sha256 of its configuration, which names its
layers: what the engine runs), signed with a key the user holds (``envbuild.bundle.provenance``).

``envbuild image-provenance IMAGE --context DIR --sign-key KEY -o FILE`` reads the image from
the local engine (``inspect``: its ID and labels) and refuses an image that was not built from
``DIR``: the ``io.envbuild.*`` labels the image carries (recipe, target, the lock file's sha256
and canonical digest, plan digest) must be the ones the context's Dockerfile sets. The statement names every file of the
context by sha256 (the Dockerfile, the lock, the scripts), the base image as the Dockerfile
names it (and whether that name is pinned by digest), envbuild's version and commit.
``envbuild image-provenance IMAGE --verify FILE --trusted-key KEY.pub`` checks that a trusted
key signed it and that the engine's image has that ID now.

The image's ID is the engine's (podman or docker, local): a registry's manifest digest exists
only once the image is pushed, and pushing is not done here.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import CheckFailed, EnvironmentProblem, InputError
from envbuild.fsio import sha256_file

# the lock twice: its file's sha256 (what sha256sum prints for the image's envbuild.lock) and its
# canonical digest (the one plans, runs and statements name)
LABELS = ("io.envbuild.recipe", "io.envbuild.target", "io.envbuild.lock.sha256", "io.envbuild.lock.digest",
          "io.envbuild.plan.sha256")
BASE_LABEL = "org.opencontainers.image.base.name"
ENGINES = ("podman", "docker")
INSPECT_TIMEOUT_S = 60
MAX_CONTEXT_FILES = 10000


@dataclass(frozen=True)
class Image:
    ref: str
    id: str  # hex sha256 of the image's configuration
    labels: dict[str, str] = field(default_factory=dict)


def parse_inspect(text: str, ref: str) -> Image:
    """``<engine> image inspect REF`` output (a JSON list of one object; podman's ``Id`` is bare
    hex, docker's ``sha256:HEX``) -> Image. Pure.

    >>> parse_inspect('[{"Id": "sha256:' + 'a' * 64 + '", "Config": {"Labels": {"x": "1"}}}]', "img").labels
    {'x': '1'}
    """
    try:
        obj = json.loads(text)[0]
        ident = str(obj["Id"]).removeprefix("sha256:")
        labels = (obj.get("Config") or {}).get("Labels") or obj.get("Labels") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise EnvironmentProblem(f"image inspect of {ref} printed no image") from None
    if len(ident) != 64 or any(c not in "0123456789abcdef" for c in ident):
        raise EnvironmentProblem(f"image inspect of {ref}: {ident[:80]!r} is not a sha256 image ID")
    return Image(ref=ref, id=ident, labels={str(k): str(v) for k, v in labels.items()})


def inspect(ref: str, engine: str = "podman", env: dict | None = None) -> Image:
    """The local engine's image ``ref`` (its ID and labels)."""
    if engine not in ENGINES:
        raise InputError(f"engine {engine!r}: envbuild reads images from {' or '.join(ENGINES)}")
    try:
        proc = subprocess.run([engine, "image", "inspect", "--", ref], capture_output=True, text=True,
                              env=env, timeout=INSPECT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EnvironmentProblem(f"{engine} is not installed here", hint="--engine names the engine that built it") from None
    if proc.returncode != 0:
        raise EnvironmentProblem(f"{engine} image inspect {ref} failed (rc {proc.returncode}): "
                                 f"{proc.stderr.strip()[-300:]}", hint="build the image first, or name it as the engine does")
    return parse_inspect(proc.stdout, ref)


def context_files(context: Path) -> dict[str, str]:
    """``{"context:<path>": sha256}`` of every regular file under ``context`` (links are refused:
    a statement names what it hashed)."""
    out: dict[str, str] = {}
    for path in sorted(context.rglob("*")):
        rel = path.relative_to(context).as_posix()
        if path.is_symlink():
            raise InputError(f"{path}: a link in the image's context; envbuild render writes none",
                             hint="render the context again")
        if path.is_file():
            out[f"context:{rel}"] = sha256_file(path)
            if len(out) > MAX_CONTEXT_FILES:
                raise InputError(f"{context}: more than {MAX_CONTEXT_FILES} files, not a rendered context")
    return out


# one ``key="value"`` of a LABEL instruction as envbuild's renderer writes it (a JSON-style string)
_LABEL = re.compile(r'(io\.envbuild\.[A-Za-z0-9._-]+)="((?:[^"\\\n]|\\.)*)"')


def dockerfile_labels(dockerfile_text: str) -> dict[str, str]:
    r"""The ``io.envbuild.*`` labels a rendered Dockerfile sets, each read as a whole value. Pure.

    >>> dockerfile_labels('LABEL io.envbuild.recipe="cpu-reference" io.envbuild.target="loc\\"al"')
    {'io.envbuild.recipe': 'cpu-reference', 'io.envbuild.target': 'loc"al'}
    """
    return {k: re.sub(r"\\(.)", r"\1", v) for k, v in _LABEL.findall(dockerfile_text)}


def check_built_from(image: Image, dockerfile_text: str, where: str) -> None:
    """The image carries the ``io.envbuild.*`` labels the context's Dockerfile sets, value for
    value (CheckFailed, exit 1, naming the first that differs)."""
    expected = dockerfile_labels(dockerfile_text)
    for key in LABELS:
        value = image.labels.get(key)
        if value is None:
            raise CheckFailed(f"{image.ref} has no {key} label: not an image envbuild rendered",
                              hint="build it from the context envbuild render --format dockerfile wrote")
        if expected.get(key) != value:
            raise CheckFailed(f"{image.ref} was not built from {where}: its {key} is {value!r}, which that "
                              "Dockerfile does not set", hint="name the context the image was built from")


def statement(image: Image, inputs: dict[str, str], *, envbuild_version: str, envbuild_commit: str | None,
              started: str, finished: str, valid_days: float | None = None) -> dict:
    """The image's in-toto statement (pure): subject the image ID, parameters its recipe, target,
    lock and plan digests and base image, dependencies the context's files."""
    from envbuild.bundle import provenance as P

    base = image.labels.get(BASE_LABEL, "")
    return P.statement(image.ref, image.id, recipe=image.labels["io.envbuild.recipe"],
                       target=image.labels["io.envbuild.target"],
                       lock_digest=image.labels["io.envbuild.lock.digest"], inputs=inputs, git=[],
                       envbuild_version=envbuild_version, envbuild_commit=envbuild_commit, started=started,
                       finished=finished, build_type=P.IMAGE_BUILD_TYPE,
                       parameters={"image": image.ref, "planDigest": image.labels["io.envbuild.plan.sha256"],
                                   "baseImage": base, "basePinned": "@sha256:" in base},
                       valid_days=P.DEFAULT_VALID_DAYS if valid_days is None else valid_days)
