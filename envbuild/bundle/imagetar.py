"""An image as its engine saved it (``podman save`` / ``docker save``): which names it holds and its
ID, read from the archive's own index, so that ``envbuild bundle --image-tar FILE`` carries the
base image the plan names and the node loads it (``<engine> load -i``) instead of pulling.

Two layouts, both what ``podman load`` and ``docker load`` read:

- docker-archive (``podman save``'s default, ``docker save``): ``manifest.json``, a list of
  ``{"Config": "<id>.json" (or blobs/sha256/<id>), "RepoTags": [...], "Layers": [...]}``;
- oci-archive (``podman save --format oci-archive``): ``index.json`` whose manifests carry
  ``org.opencontainers.image.ref.name``, each manifest blob naming its config by digest.

The ID is the sha256 of the image's configuration (what ``podman images --no-trunc`` shows).
Names compare as the engines resolve them: ``ubuntu:22.04`` is ``docker.io/library/ubuntu:22.04``.

    >>> same_image("ubuntu:22.04", "docker.io/library/ubuntu:22.04")
    True
"""

from __future__ import annotations

import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import InputError

MAX_INDEX = 4 * 2**20  # manifest.json, index.json, a manifest blob: no larger in a saved image
HEX = re.compile(r"[0-9a-f]{64}")
HINT = "give the file `podman save -o FILE IMAGE` (or `docker save -o FILE IMAGE`) wrote for the base image"


@dataclass(frozen=True)
class SavedImage:
    """One image of a saved archive."""

    names: tuple[str, ...]
    id: str


def normalize(ref: str) -> str:
    """``ref`` as the engines resolve a short name: a registry-less name is Docker Hub's."""
    name, _, digest = ref.partition("@")
    first = name.split("/", 1)[0]
    if "/" not in name or not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name if '/' in name else 'library/' + name}"
    if ":" not in name.rsplit("/", 1)[-1] and not digest:
        name += ":latest"
    return name + (f"@{digest}" if digest else "")


def same_image(a: str, b: str) -> bool:
    return normalize(a) == normalize(b)


def _json(tar: tarfile.TarFile, name: str, file: Path) -> object:
    try:
        member = tar.getmember(name)
    except KeyError:
        return None
    if not member.isfile() or member.size > MAX_INDEX:
        raise InputError(f"{file}: {name} is not a saved image's index", hint=HINT)
    raw = tar.extractfile(member)
    try:
        return json.loads(raw.read() if raw else b"")
    except ValueError:
        raise InputError(f"{file}: {name} is not JSON", hint=HINT) from None


def _hex(value: object) -> str | None:
    text = str(value).removeprefix("sha256:").rsplit("/", 1)[-1].removesuffix(".json")
    return text if HEX.fullmatch(text) else None


def read(file: Path) -> list[SavedImage]:
    """The images of the archive ``file`` (InputError when it is no saved image)."""
    if not file.is_file():
        raise InputError(f"--image-tar {file}: no such file", hint=HINT)
    try:
        with tarfile.open(file) as tar:
            docker = _json(tar, "manifest.json", file)
            if isinstance(docker, list):
                return [SavedImage(names=tuple(str(t) for t in (e.get("RepoTags") or [])), id=_hex(e.get("Config")) or "")
                        for e in docker if isinstance(e, dict)]
            index = _json(tar, "index.json", file)
            if isinstance(index, dict):
                out = []
                for m in index.get("manifests") or []:
                    name = ((m or {}).get("annotations") or {}).get("org.opencontainers.image.ref.name")
                    digest = _hex((m or {}).get("digest"))
                    blob = _json(tar, f"blobs/sha256/{digest}", file) if digest else None
                    config = _hex(((blob or {}).get("config") or {}).get("digest")) if isinstance(blob, dict) else None
                    out.append(SavedImage(names=(str(name),) if name else (), id=config or ""))
                return out
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"--image-tar {file}: not a readable tar: {exc}", hint=HINT) from None
    raise InputError(f"--image-tar {file}: neither manifest.json (docker-archive) nor index.json (oci-archive) "
                     "in it: not an image an engine saved", hint=HINT)


def find(file: Path, name: str) -> SavedImage:
    """The image called ``name`` in the archive ``file``; InputError naming what it holds instead."""
    images = read(file)
    for image in images:
        if any(same_image(n, name) for n in image.names):
            if not image.id:
                raise InputError(f"--image-tar {file}: {name} has no readable image ID in it", hint=HINT)
            return image
    held = ", ".join(n for i in images for n in i.names) or "no named image"
    raise InputError(f"--image-tar {file} holds {held}, not the base image {name} the plan needs",
                     hint=f"save that image: podman save -o FILE {name} (or docker save)")
