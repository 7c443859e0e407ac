"""Shared printing helpers for CLI commands: JSON or rich tables, never both."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

from envbuild.display import visible


class SafeConsole(Console):
    """A rich console that shows the control bytes of every string it renders
    (``envbuild.display.visible``): printed text and table cells from recipes, logs and nodes
    cannot move the cursor, retitle the terminal or set the clipboard. rich's own styling is
    added after, so colours stay."""

    def render_str(self, text: str, *args: Any, **kwargs: Any):  # noqa: ANN201 - rich's Text
        return super().render_str(visible(text), *args, **kwargs)


console = SafeConsole(highlight=False, soft_wrap=True)
err_console = SafeConsole(stderr=True, highlight=False)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def emit_json_line(obj: Any) -> None:
    """One JSON object on one line (JSON Lines: a stream of events, then a result)."""
    sys.stdout.write(json.dumps(obj, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()
