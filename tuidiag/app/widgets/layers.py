"""The per-layer gradient view: layers (input to output) by time, coloured by log norm.

Each cell is a space with a background colour on a log scale (blue: vanishing,
green: healthy, red: exploding) plus a glyph that also encodes the level, so the
view still reads under ``NO_COLOR``.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.widgets import Static

from tuidiag.app.widgets.guard import guarded
from tuidiag.sources import KIND_TUIDIAG
from tuidiag.viewmodel.snapshot import LayerGrid
from tuidiag.text.safe import clean

LEVELS = [(-6, "#1f3b8f", "."), (-4, "#2f6fd0", ":"), (-2, "#2aa198", "-"), (0, "#3fb950", "="), (1, "#d29922", "+"), (2, "#f85149", "#")]
"""(upper bound of log10 norm, colour, glyph), checked in order; beyond the last: the last."""


def cell_style(log_norm: float) -> tuple[str, str]:
    """Background colour and glyph for one cell."""
    if not np.isfinite(log_norm):
        return "", " "
    for bound, colour, glyph in LEVELS:
        if log_norm < bound:
            return colour, glyph
    return LEVELS[-1][1], LEVELS[-1][2]


class LayerHeatmap(Static):
    """Rows are weight layers in model order, columns are step ranges."""

    _drawn: tuple[LayerGrid, int, str] | None = None

    @guarded("the layer heatmap")
    def show(self, grid: LayerGrid, source: str = KIND_TUIDIAG) -> None:
        """Render ``grid`` to fit the widget's width (nothing to do when neither changed); ``source``: the run's kind."""
        width = max(10, self.size.width - 2)
        if self._drawn is not None and self._drawn[0] is grid and self._drawn[1:] == (width, source):
            return
        self._drawn = (grid, width, source)
        self.update(render_grid(grid, width, source), layout=False)  # its size is set by the layout (1fr), not by its text

    def on_resize(self) -> None:
        """Fit the grid to the new width."""
        if self._drawn is not None:
            self.show(self._drawn[0], self._drawn[2])

    def show_error(self, text: Text) -> None:
        """Show why the grid could not be drawn (the next ``show`` tries again)."""
        self._drawn = None
        self.update(text)


def render_grid(grid: LayerGrid, width: int, source: str = KIND_TUIDIAG) -> Text:
    """The heatmap as literal text (layer names come from run files)."""
    out = Text()
    if not grid.layers and source != KIND_TUIDIAG:
        return Text(f"the per-layer view needs tuidiag's recorder: this run is a {clean(source, 20)} log, which holds no "
                    "per-layer gradient norms (record with tuidiag.Recorder and rec.watch(model))")
    if not grid.layers:
        return Text("no per-layer gradient norms recorded (rec.watch(model) records them)")
    label_width = min(18, max(len(n) for n in grid.layers) + 1)
    columns = max(4, width - label_width - 1)
    bins = grid.log_norms.shape[1]
    pick = np.linspace(0, bins - 1, min(columns, bins)).astype(int)
    for name, row in zip(grid.layers, grid.log_norms):
        out.append(clean(name, label_width - 1).rjust(label_width - 1) + " ")
        for value in row[pick]:
            colour, glyph = cell_style(value)
            out.append(glyph, style=f"black on {colour}" if colour else "")
        out.append("\n")
    out.append(f"{'':>{label_width}}step 0 .. {int(grid.step_edges[-1]) - 1}   ", style="dim")
    out.append("log10 |grad|: ", style="dim")
    for bound, colour, glyph in LEVELS:
        out.append(glyph, style=f"black on {colour}")
        out.append(f"<{bound} ", style="dim")
    return out
