"""The interpreter of the node package's floor (``envbuild.node.PYTHON_FLOOR``) on this machine:
``python3.X`` of pyenv ($PYENV_ROOT, ~/.pyenv) or on $PATH, checked to be that version."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from envbuild.node import PYTHON_FLOOR

FLOOR = ".".join(map(str, PYTHON_FLOOR))


@lru_cache(maxsize=1)
def floor_python() -> str | None:
    """The path of a Python ``FLOOR`` interpreter, or None when this machine has none."""
    name = f"python{FLOOR}"
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = [*sorted(map(str, root.glob(f"versions/{FLOOR}.*/bin/{name}")), reverse=True), shutil.which(name)]
    for path in filter(None, candidates):
        p = subprocess.run([path, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=60)
        if p.returncode == 0 and p.stdout.strip() == FLOOR:
            return path
    return None
