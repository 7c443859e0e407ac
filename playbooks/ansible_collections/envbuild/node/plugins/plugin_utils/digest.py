"""The sha256 of a controller file, as the node's ``place`` action and ``capture`` reports give
it: what ``envbuild_put`` sends with a file and ``envbuild_fetch`` checks a fetched one against."""
from __future__ import annotations

import hashlib


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
