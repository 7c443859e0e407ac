"""A rich table that folds into records on a narrow terminal (issue 40: tables readable at 80
columns).

``FoldingTable`` is a ``rich.table.Table``: commands build it the same way. When it is rendered
narrower than its rows need (and narrower than ``FOLD_BELOW`` columns), each row is printed as
a record instead of squeezed cells: the first column on its own line, then ``column: value``
lines indented by two, each wrapped at the terminal's width. Wide terminals get the boxed table.

Every cell given as a string is data (``envbuild.cli.output.data``): its control bytes shown and
rich markup off, so a node's ``[bold]`` or a recipe's ``[link=...]`` prints as written; a cell
that is styled on purpose is passed as a ``rich.text.Text``.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from envbuild.cli.output import data

FOLD_BELOW = 120  # a terminal at least this wide always gets the table


def _text(console: Console, cell) -> Text:
    if isinstance(cell, Text):
        return cell
    return console.render_str(str(cell)) if isinstance(cell, str) else Text(str(cell))


class FoldingTable(Table):
    def add_row(self, *renderables, **kwargs) -> None:  # noqa: ANN001 - rich's signature
        """rich's ``add_row``, each string cell made data (markup off, controls shown)."""
        super().add_row(*(data(c) if isinstance(c, str) else c for c in renderables), **kwargs)

    def _natural_width(self, console: Console) -> int:
        widths = []
        for col in self.columns:
            cells = [_text(console, c).plain for c in col.cells]
            longest = max((max((cell_len(line) for line in c.splitlines()), default=0) for c in cells), default=0)
            widths.append(max(longest, cell_len(str(col.header))) + 2 * (self.padding[1] if self.padding else 1))
        return sum(widths) + len(widths) + 1  # the vertical rules

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if width >= FOLD_BELOW or width >= self._natural_width(console):
            yield from super().__rich_console__(console, options)
            return
        if self.title:
            yield from _text(console, self.title).wrap(console, width, overflow="fold")
        columns = [list(col.cells) for col in self.columns]
        for r in range(self.row_count):
            first = _text(console, columns[0][r]).copy()
            first.stylize("bold")
            yield from first.wrap(console, width, overflow="fold")
            for col, cells in zip(self.columns[1:], columns[1:]):
                value = _text(console, cells[r])
                if not value.plain.strip():
                    continue
                line = Text.assemble((f"{col.header}: ", "dim"), value)
                for wrapped in line.wrap(console, max(20, width - 2), overflow="fold"):
                    yield Text("  ") + wrapped
