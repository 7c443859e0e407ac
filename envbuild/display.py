"""Text from recipes, logs, facts and nodes shown to an operator with its control bytes visible.

A hostile recipe field, benchmark log or node output could carry terminal escapes (ESC, OSC 0/8/52
to retitle the terminal, plant links or set the clipboard; 8-bit CSI 0x9b; BEL, backspace,
carriage return to overwrite a line). ``visible(text)`` writes each C0 control byte but newline and
tab, DEL and each C1 control as ``\\xNN``: what a reviewer sees is what the text holds. It is
applied where text leaves envbuild: the CLI's consoles (``envbuild.cli.output``), ``parse``'s
lines, and the Markdown and HTML of reports, appendices and re-judged results (JSON escapes them
itself).

>>> visible("ok\\x1b]52;c;ZXZpbA==\\x07 \\x9b31m\\nnext\\tcol")
'ok\\\\x1b]52;c;ZXZpbA==\\\\x07 \\\\x9b31m\\nnext\\tcol'
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with every control byte but newline and tab written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text) if text else text
