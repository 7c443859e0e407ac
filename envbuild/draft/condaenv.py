"""A conda environment file (environment.yml): its conda dependencies, its ``pip:`` list and
its Python, each with its line (pure; read by envbuild's bounded YAML reader, data only).

>>> e = parse("name: neox\\nchannels: [conda-forge]\\ndependencies:\\n  - python=3.8\\n  - cudatoolkit=11.1\\n"
...           "  - pip\\n  - pip:\\n      - -r requirements/requirements.txt\\n      - einops==0.3.0\\n")
>>> e.python, [(r.line, r.text) for r in e.conda], [(r.line, r.text) for r in e.pip]
(Read(line=4, text='3.8'), [(5, 'cudatoolkit=11.1'), (6, 'pip')], [(8, '-r requirements/requirements.txt'), (9, 'einops==0.3.0')])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envbuild.draft.cite import Read
from envbuild.errors import InputError
from envbuild.yamlsrc import load_yaml


@dataclass(frozen=True)
class CondaEnv:
    """The conda packages (``python`` apart), the pip lines and the channels of the file."""

    python: Read | None = None
    conda: tuple[Read, ...] = ()
    pip: tuple[Read, ...] = ()
    channels: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def parse(text: str, name: str = "environment.yml") -> CondaEnv:
    """See module; a file that is not a YAML mapping is a note."""
    try:
        data, loc = load_yaml(name, text)
    except InputError as exc:
        return CondaEnv(notes=(f"{exc}: not read",))
    if not isinstance(data, dict):
        return CondaEnv(notes=(f"{name}: not a mapping: not read",))
    python, conda, pip = None, [], []
    for i, dep in enumerate(data.get("dependencies") or []):
        line = loc.line_for(("dependencies", i)) or 1
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            pip.extend(Read(loc.line_for(("dependencies", i, "pip", j)) or line, str(p))
                       for j, p in enumerate(dep["pip"]))
        elif isinstance(dep, str):
            m = re.fullmatch(r"python\s*[=<>~!]=?\s*([0-9][0-9.]*)(?:[.=*].*)?", dep.strip())
            if m:
                python = Read(line, ".".join(m.group(1).split(".")[:2]))
            elif dep.strip() != "python":
                conda.append(Read(line, dep.strip()))
    channels = tuple(str(c) for c in data.get("channels") or [] if isinstance(c, str))
    return CondaEnv(python, tuple(conda), tuple(pip), channels)
