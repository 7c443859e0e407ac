"""A rendered folder: generated text files plus envbuild's own files copied verbatim.

Renderers return a ``Context`` (pure); ``write`` puts it on disk. The committed renders under
``containers/`` keep the generated files and list the verbatim ones in ``ASSETS`` (their
source is envbuild's own tree; copying them into every committed folder would only duplicate
them).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.shipped import CHECKOUT

ASSETS = "ASSETS"


@dataclass(frozen=True)
class Context:
    files: dict[str, str]  # relative path -> generated text
    copies: dict[str, Path] = field(default_factory=dict)  # relative path -> envbuild's file
    modes: dict[str, int] = field(default_factory=dict)  # relative path -> mode (default 0644)
    wheels: list[str] = field(default_factory=list)  # wheel file names wanted in wheelhouse/

    def assets_text(self) -> str:
        root = CHECKOUT
        lines = ["# envbuild's own files that `envbuild render` copies into this folder verbatim",
                 "# (left out of the committed copy): <path here> <- <source in the envbuild tree>"]
        for rel, src in sorted(self.copies.items()):
            lines.append(f"{rel} <- {src.resolve().relative_to(root)}")
        return "\n".join(lines) + "\n"

    def golden(self) -> dict[str, str]:
        """What is committed: the generated files and the ``ASSETS`` list."""
        out = dict(self.files)
        if self.copies:
            out[ASSETS] = self.assets_text()
        return out


def _safe(rel: str) -> str:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise ValueError(f"not a relative path inside the folder: {rel!r}")
    return rel


def write(ctx: Context, out: Path, *, wheelhouse: Path | None = None) -> list[str]:
    """Write ``ctx`` under ``out`` (created); wheels are hard-linked (else copied) from
    ``wheelhouse``. Returns the relative paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rel, text in sorted(ctx.files.items()):
        path = out / _safe(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(ctx.modes.get(rel, 0o644))
        written.append(rel)
    for rel, src in sorted(ctx.copies.items()):
        path = out / _safe(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, path)
        path.chmod(ctx.modes.get(rel, 0o644))
        written.append(rel)
    if ctx.wheels:
        from envbuild.errors import InputError

        if wheelhouse is None:
            raise InputError("this render needs a wheelhouse (--wheelhouse DIR) for "
                             + ", ".join(ctx.wheels))
        folder = out / "wheelhouse"
        folder.mkdir(exist_ok=True)
        for name in ctx.wheels:
            src, dst = wheelhouse / _safe(name), folder / name
            if not src.is_file():
                raise InputError(f"{name} is not in the wheelhouse {wheelhouse}",
                                 hint="the lock names the wheel file; put it there")
            if dst.exists():
                dst.unlink()
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
            written.append(f"wheelhouse/{name}")
    return written
