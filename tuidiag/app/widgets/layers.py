"""The per-layer gradient view: layers (input to output) by time, coloured by log norm.

Each cell is a space with a background colour on a log scale (blue: vanishing,
green: healthy, red: exploding) plus a glyph that also encodes the level, so the
view still reads under ``NO_COLOR``. The scale reaches down to 1e-12, so a vanished layer (1e-10) reads
apart from a merely small one (1e-6). A model with more layers than the widget has lines shows a window of
them, with a line saying how many are above and below; the arrow keys (once focused) and the mouse wheel
scroll it, and the legend stays on the last lines.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import events
from textual.app import RenderResult
from textual.binding import Binding
from textual.strip import Strip
from textual.widgets import Static

from tuidiag.app.widgets.guard import guarded
from tuidiag.app.widgets.line_strips import text_strips
from tuidiag.sources import KIND_TUIDIAG
from tuidiag.viewmodel.snapshot import LayerGrid
from tuidiag.text.safe import clean

LEVELS = [(-12, "#10163a", "_"), (-10, "#17276b", ","), (-8, "#1f3b8f", "."), (-6, "#2656b0", ";"), (-4, "#2f6fd0", ":"),
          (-2, "#2aa198", "-"), (0, "#3fb950", "="), (1, "#d29922", "+"), (2, "#f85149", "#")]
"""(upper bound of log10 norm, colour, glyph), checked in order; beyond the last: the last."""
_LIGHT_BELOW = -7
"""Buckets below this bound are dark: their glyph is drawn white."""


def cell_style(log_norm: float) -> tuple[str, str]:
    """Background colour and glyph for one cell."""
    if not np.isfinite(log_norm):
        return "", " "
    for bound, colour, glyph in LEVELS:
        if log_norm < bound:
            return colour, glyph
    return LEVELS[-1][1], LEVELS[-1][2]


def _glyph_style(colour: str) -> str:
    light = any(c == colour and bound < _LIGHT_BELOW for bound, c, _ in LEVELS)
    return f"{'white' if light else 'black'} on {colour}"


class LayerHeatmap(Static, can_focus=True):
    """Rows are weight layers in model order, columns are step ranges; scrolls when the layers outnumber its lines."""

    BINDINGS = [Binding("up", "scroll_rows(-1)", "Layer up", show=False, tooltip="scroll the layers one row up (the wheel too)"),
                Binding("down", "scroll_rows(1)", "Layer down", show=False, tooltip="scroll the layers one row down"),
                Binding("pageup", "scroll_rows(-10)", "Layers up", show=False, tooltip="ten layers up"),
                Binding("pagedown", "scroll_rows(10)", "Layers down", show=False, tooltip="ten layers down")]

    _shown: tuple[LayerGrid, str] | None = None
    """The grid last given to :meth:`show`, with the run's kind (None: none yet, or it failed to draw)."""
    _drawn: tuple[LayerGrid, int, str, int, int] | None = None
    """What the drawing is of: (grid, width, kind, height, first layer)."""
    _text: Text | None = None
    """The drawing (or why the grid could not be drawn)."""
    _strips: tuple[Text, tuple[object, ...], list[Strip] | None] | None = None
    """The drawing, the size, theme and style its strips were made for, and its rows as strips (:meth:`render_line`)."""
    top = 0
    """The first layer shown."""

    def show(self, grid: LayerGrid, source: str = KIND_TUIDIAG) -> None:
        """Show ``grid`` (``source``: the run's kind), drawn at the next paint for the size the widget has then: on a
        tab's first visit the widget has no size until it is laid out, and a drawing for a guessed width showed for a
        frame before the right one (nothing to do when the grid is the one shown)."""
        if self._shown is not None and self._shown[0] is grid and self._shown[1] == source:
            return
        self._shown = (grid, source)
        self.refresh()

    def render(self) -> RenderResult:
        """The grid drawn to fit the widget's size now (drawn again only when the grid, size or scroll changed)."""
        if self._shown is not None:
            self._fit(*self._shown)
        return self._text if self._text is not None else super().render()

    def render_line(self, y: int) -> Strip:
        """Row ``y`` of the drawing, its rows made strips directly (:mod:`~tuidiag.app.widgets.line_strips`, as the
        charts do): Textual's conversion of a grid's thousand coloured cells took half the tab's first frame. While
        text in it is selected, or before it has a drawing, Textual draws it."""
        text = self.render()
        if self.text_selection is not None or not isinstance(text, Text):
            return super().render_line(y)
        base = self.visual_style
        key = (self.size.width, self.size.height, self.app.theme, base)
        # the drawing compared by identity: comparing two by value, at every row, walked all their spans
        if self._strips is None or self._strips[0] is not text or self._strips[1] != key:
            self._strips = (text, key, text_strips(text, base, self.size.width, self.size.height, self.app.ansi_theme,
                                                   self.app.console.get_style))
        strips = self._strips[2]
        if strips is None:  # a Text with a style of its own (an error message): Textual draws it
            return super().render_line(y)
        return strips[y] if 0 <= y < len(strips) else Strip.blank(self.size.width, base.rich_style)

    @guarded("the layer heatmap")
    def _fit(self, grid: LayerGrid, source: str) -> None:
        width = max(10, self.size.width - 2)
        height = self.size.height or 1000
        if self._drawn is not None and self._drawn[0] is grid and self._drawn[1:] == (width, source, height, self.top):
            return
        self.top = clamp_top(len(grid.layers), self.top, width, height)
        self._drawn = (grid, width, source, height, self.top)
        self._text = render_grid(grid, width, source, height, self.top)

    def action_scroll_rows(self, by: int) -> None:
        """Show the layers ``by`` rows further down (negative: up)."""
        if self._shown is not None:
            grid = self._shown[0]
            self.top = clamp_top(len(grid.layers), max(0, self.top + by), max(10, self.size.width - 2), self.size.height or 1000)
            self.refresh()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        """The wheel scrolls the layers."""
        event.stop()
        self.action_scroll_rows(2)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        """The wheel scrolls the layers."""
        event.stop()
        self.action_scroll_rows(-2)

    def show_error(self, text: Text) -> None:
        """Show why the grid could not be drawn (the next ``show`` tries again)."""
        self._shown = self._drawn = None
        self._text = text
        self.refresh()


def legend(width: int) -> list[Text]:
    """The colour scale, wrapped to ``width`` columns."""
    lines = [Text().append("log10 |grad|:", style="dim")]  # a span, not the line's own style (a span over the others)
    entries = [(glyph, colour, f"<{bound}") for bound, colour, glyph in LEVELS[:-1]]
    entries.append((LEVELS[-1][2], LEVELS[-1][1], f">={LEVELS[-2][0]}"))
    for glyph, colour, label in entries:
        if len(lines[-1]) + 2 + len(label) > width:
            lines.append(Text())
        lines[-1].append(" ")
        lines[-1].append(glyph, style=_glyph_style(colour))
        lines[-1].append(label, style="dim")
    return lines


def window(count: int, top: int, width: int, height: int) -> tuple[int, int, bool, bool]:
    """The layers shown (``first``, ``end``) among ``count`` in ``height`` lines from ``top``, and whether a
    line says more are above or below."""
    room = max(1, height - 1 - len(legend(width)))  # the step range and the legend stay
    if count <= room:
        return 0, count, False, False
    top = min(max(0, top), count - max(1, room - 1))  # scrolled to the end: the last layer on the last row
    if top == 0:
        return 0, max(1, room - 1), False, True
    if top + room - 1 >= count:
        return top, count, True, False
    return top, top + max(1, room - 2), True, True


def clamp_top(count: int, top: int, width: int, height: int) -> int:
    """``top`` moved so that the window ends at the last layer at the latest."""
    return window(count, top, width, height)[0]


def _note(text: str, short: str, label_width: int, width: int) -> str:
    """A line under the layers: ``text`` in line with their cells, or moved left, or ``short``, or cut: one line of at
    most ``width`` cells, as :func:`window` counts it (a longer one was wrapped, and pushed the legend out of view)."""
    for words in (text, short):
        if len(words) <= width:
            return " " * min(label_width, width - len(words)) + words
    return short[:width]


def render_grid(grid: LayerGrid, width: int, source: str = KIND_TUIDIAG, height: int | None = None, top: int = 0) -> Text:
    """The heatmap as literal text (layer names come from run files) in ``height`` lines (None: every layer)."""
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
    count = len(grid.layers)
    first, end, above, more_after = window(count, top, width, height if height is not None else count + 10)
    if above:
        out.append(_note(f"^ {first} more layer{'s' * (first != 1)} above (up/wheel)", f"^ {first} more above", label_width,
                         width) + "\n", style="bold")
    for name, row in zip(grid.layers[first:end], grid.log_norms[first:end]):
        out.append(clean(name, label_width - 1).rjust(label_width - 1) + " ")
        for value in row[pick]:
            colour, glyph = cell_style(value)
            out.append(glyph, style=_glyph_style(colour) if colour else "")
        out.append("\n")
    if more_after:
        more = count - end
        out.append(_note(f"v {more} more layer{'s' * (more != 1)} below (down/wheel)", f"v {more} more below", label_width,
                         width) + "\n", style="bold")
    last = int(grid.step_edges[-1]) - 1
    out.append(_note(f"step 0 .. {last}  ({count} layers)", f"step 0 .. {last}", label_width, width) + "\n", style="dim")
    out.append(Text("\n").join(legend(width)))
    return out
