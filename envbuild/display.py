"""Text from recipes, logs, facts and nodes shown to an operator with its control bytes visible.

A hostile recipe field, benchmark log or node output could carry terminal escapes (ESC, OSC 0/8/52
to retitle the terminal, plant links or set the clipboard; 8-bit CSI 0x9b; BEL, backspace,
carriage return to overwrite a line). ``visible(text)`` writes each C0 control byte but newline and
tab, DEL and each C1 control as ``\\xNN``: what a reviewer sees is what the text holds. It is
applied where text leaves envbuild: the CLI's consoles (``envbuild.cli.output``), ``parse``'s
lines, the live view's log tail, table cells (``envbuild.cli.output.data``: rich markup off too),
and the Markdown and HTML of reports, appendices and re-judged results. JSON escapes C0 itself;
``json_visible`` escapes DEL and C1 (U+009B is CSI to a terminal) in JSON text printed raw.

>>> visible("ok\\x1b]52;c;ZXZpbA==\\x07 \\x9b31m\\nnext\\tcol")
'ok\\\\x1b]52;c;ZXZpbA==\\\\x07 \\\\x9b31m\\nnext\\tcol'
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with every control byte but newline and tab written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text) if text else text


_JSON_RAW = re.compile(r"[\x7f-\x9f]")


def json_visible(text: str) -> str:
    """JSON text with DEL and every C1 control written as ``\\u00NN``: JSON allows them raw in a
    string (``json.dumps(ensure_ascii=False)``, pydantic's ``model_dump_json``), and a terminal
    reads U+009B as CSI. The value read back is the same (C0 controls JSON escapes itself).

    >>> json_visible('{"gpu": "H100' + chr(0x9b) + '31m"}')
    '{"gpu": "H100\\\\u009b31m"}'
    """
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m[0]):04x}", text) if text else text
