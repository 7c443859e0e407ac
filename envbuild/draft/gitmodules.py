"""``.gitmodules``: each submodule's name, path and URL, at the line of its section (pure).

>>> [(s.line, s.path, s.url) for s in parse('[submodule "apex"]\\n\\tpath = third_party/apex\\n'
...                                          '\\turl = https://github.com/NVIDIA/apex\\n')]
[(1, 'third_party/apex', 'https://github.com/NVIDIA/apex')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Submodule:
    line: int
    name: str
    path: str = ""
    url: str = ""
    branch: str | None = None


def parse(text: str) -> list[Submodule]:
    out: list[Submodule] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if m := re.match(r'^\s*\[submodule\s+"([^"]+)"\]', raw):
            out.append(Submodule(number, m.group(1)))
        elif out and (m := re.match(r"^\s*(path|url|branch)\s*=\s*(.+?)\s*$", raw)):
            out[-1] = replace(out[-1], **{m.group(1): m.group(2)})
    return out
