"""The overview's trend cell: a sparkline that says its true width and, given fewer cells, is drawn at that width.

Textual's ``Sparkline`` renderable reports its *height* as its widest measure, so a table column holding it
was sized to its header (5 cells) and the 12-cell line was cropped to its oldest 5 cells, hiding the newest.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from textual.renderables.sparkline import Sparkline


class TrendSparkline(Sparkline[float]):
    """A one-line sparkline of ``width`` cells; where fewer cells are given it is computed at the cells
    given (all the data, in fewer buckets), so it never shows only its oldest part."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown = min(self.width or options.max_width, options.max_width)
        yield from Sparkline(self.data, width=shown, min_color=self.min_color.color, max_color=self.max_color.color,
                             summary_function=self.summary_function).__rich_console__(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        width = self.width or options.max_width
        return Measurement(width, width)
