"""Shared printing helpers for CLI commands: JSON or rich tables, never both."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

from envbuild.display import json_visible, visible


class SafeConsole(Console):
    """A rich console that shows the control bytes of every string it renders
    (``envbuild.display.visible``): printed text and table cells from recipes, logs and nodes
    cannot move the cursor, retitle the terminal or set the clipboard. rich's own styling is
    added after, so colours stay."""

    def render_str(self, text: str, *args: Any, **kwargs: Any):  # noqa: ANN201 - rich's Text
        return super().render_str(visible(text), *args, **kwargs)


console = SafeConsole(highlight=False, soft_wrap=True)
err_console = SafeConsole(stderr=True, highlight=False)


def data(value: Any, style: str = "") -> Text:
    """A table cell or line of data (a node's, a recipe's, a log's): its control bytes shown
    (``visible``) and rich markup off, so ``[bold]`` in a GPU name prints as it is."""
    return value if isinstance(value, Text) else Text(visible(str(value)), style=style)


def write_json_text(text: str) -> None:
    """JSON text made elsewhere (pydantic, ``ensure_ascii=False``) to stdout, DEL and C1
    controls escaped (``json_visible``)."""
    sys.stdout.write(json_visible(text))


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def emit_json_line(obj: Any) -> None:
    """One JSON object on one line (JSON Lines: a stream of events, then a result)."""
    sys.stdout.write(json.dumps(obj, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()
