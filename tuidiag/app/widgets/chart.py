"""A metric chart: plotext through textual-plotext, fed downsampled lines from a snapshot.

Every drawing starts from a fresh plotext figure built from the chart alone
(:func:`draw_chart`): plotext changes a figure's state while it builds it (its
log scale is applied to the stored data in place), so a figure is never built
twice. The log transform, the axis ranges and the ticks are computed on copies
by :mod:`tuidiag.viewmodel.chart_axes`, and plotext only draws numbers in [0, 1].

plotext draws the frame, tick marks and lines; the chart writes the words around
them itself (:mod:`tuidiag.viewmodel.chart_labels`): the title, y labels in a left
margin, the x labels after the axis name, and a bottom row with the legend or
the cursor's readout. Each series has its own glyph as well as its own colour
(``GLYPHS``), so series stay apart without colour (``NO_COLOR``, colour blindness).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

import numpy as np
from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.app import RenderResult
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot
from plotext._dict import themes as plotext_themes

from tuidiag.app.widgets.chart_drawing import ChartDrawing, ChartInputs
from tuidiag.app.widgets.guard import failure_text
from tuidiag.app.widgets.line_strips import text_strips
from tuidiag.app.widgets.plot_rows import figure_rows
from tuidiag.viewmodel.chart_axes import ACTION, Axis, FAILED_ACTION, MARKER, NONFINITE, RESUME, TIME, PlotData, plot_data
from tuidiag.viewmodel.chart_clock import elapsed_at
from tuidiag.viewmodel.chart_cursor import readout, readout_text
from tuidiag.viewmodel.chart_labels import x_labels, y_labels
from tuidiag.viewmodel.chart_smoothing import strength_label
from tuidiag.viewmodel.snapshot import LABEL_CELLS, Chart
from tuidiag.text.safe import clean

COLORS: tuple[tuple[int, int, int], ...] = (
    (0, 175, 215), (255, 135, 0), (95, 215, 95), (215, 95, 215), (95, 135, 255), (215, 215, 0), (208, 208, 208), (138, 138, 138),
    (138, 138, 138),
)
"""Series colours: cyan, orange, green, magenta, blue, yellow, white, gray, and gray again (for a light glyph)."""
GLYPHS = ("braille", "•", "+", "x", "*", "o", "#", "%", "·")
"""Series glyphs, in the same order: the first series a fine braille line, the others a character each."""
LEGEND_GLYPHS = {"braille": "⠤"}
"""How the legend and readout write a glyph (braille lines as one braille cell)."""
FAINT = 0.4
"""The raw series behind a smoothed one: its colour this far from the background towards the full colour."""
VLINE_COLORS = {NONFINITE: "red", ACTION: "green", RESUME: "blue+", MARKER: "yellow"}
"""Vertical lines: the first non-finite step, live actions that held, resumed sessions, the replay cursor."""
CURSOR_GLYPH = "┊"
"""The chart cursor's column (apart from the solid lines of the other vertical marks, also without colour)."""
MIN_WIDTH, MIN_HEIGHT = 12, 5
"""Below this, a chart shows a one-line note instead of a plot."""
BOTTOM_ROW_FROM = 8
"""From this height on, a chart has a bottom row: the legend, or the cursor's readout."""
FAILED_MARKS = 12
"""Red x marks stacked over the plot's height where a live action failed (not the NaN's red line)."""
X_LABEL_SPACE = 9
"""Columns per x tick: a label of up to 6 characters and room between two."""


class MetricChart(PlotextPlot):
    """One chart; ``show(chart)`` replaces its data, ``log_scale`` toggles the y axis, ``view`` sets
    its smoothing, x axis (step or time) and cursor."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.chart: Chart | None = None
        self.log_scale: bool | None = None
        self.marker: int | None = None
        self.smoothing = 0.0
        self.time_axis = False
        self.cursor: int | None = None
        self._version = 0
        """Bumped on every change of data, marker, scale or view: the drawing is reused until it or the size changes."""
        self._rendered: tuple[tuple[object, ...], RenderResult] | None = None
        self._strips: tuple[tuple[object, ...], list[Strip] | None] | None = None
        self._ahead: ChartDrawing | None = None
        """A drawing made before this chart was composed (:meth:`adopt`): used at the first paint if it fits."""

    def adopt(self, drawing: ChartDrawing) -> None:
        """Keep ``drawing`` (made ahead, in a worker): the first paint uses it in place of drawing, if it was made
        from exactly what this chart then shows, at its size (:meth:`ChartInputs.same_as`)."""
        self._ahead = drawing

    def inputs(self, base: VisualStyle) -> ChartInputs:
        """What a drawing of this chart now depends on (``base``: the widget's base style)."""
        return ChartInputs(self.chart, self.chart is not None and self._use_log(self.chart), self.marker, self.smoothing,
                           self.time_axis, self.cursor, self.size.width, self.size.height, self.app.theme, base)

    def show(self, chart: Chart, marker: int | None = None) -> None:
        """Draw ``chart`` (and a vertical marker at step ``marker``); nothing to do when both are unchanged."""
        if chart is self.chart and marker == self.marker:
            return
        self.chart, self.marker = chart, marker
        self.redraw()

    def view(self, *, smoothing: float, time_axis: bool, cursor: int | None) -> None:
        """Smooth with EMA weight ``smoothing`` (0: raw), put time on the x axis, mark the cursor step;
        nothing to do when unchanged."""
        if (smoothing, time_axis, cursor) != (self.smoothing, self.time_axis, self.cursor):
            self.smoothing, self.time_axis, self.cursor = smoothing, time_axis, cursor
            self.redraw()

    def toggle_log(self) -> None:
        """Switch between linear and log y."""
        if self.chart is not None:
            self.log_scale = not self._use_log(self.chart)
            self.redraw()

    def _use_log(self, chart: Chart) -> bool:
        return chart.log_default if self.log_scale is None else self.log_scale

    def redraw(self) -> None:
        """Draw again from the current chart at the next repaint."""
        self._version += 1
        self.refresh()

    def render_line(self, y: int) -> Strip:
        """Row ``y`` of the drawing, through Textual's Line API: the rows become strips directly
        (:mod:`~tuidiag.app.widgets.line_strips`), not through Textual's conversion of a ``Text``;
        while text in the chart is selected, Textual draws it (with the selection's highlight)."""
        if self.text_selection is not None:  # Textual's own path draws the selection's highlight
            return super().render_line(y)
        base = self.visual_style
        key = (self._version, self.size.width, self.size.height, self.app.theme, base)
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.inputs.same_as(self.inputs(base)):
            self._rendered, self._strips = (key[:4], ahead.text), (key, ahead.strips)
        if self._strips is None or self._strips[0] != key:
            text = self.render()
            self._strips = (key, text_strips(text, base, self.size.width, self.size.height, self.app.ansi_theme,
                                             self.app.console.get_style) if isinstance(text, Text) else None)
        strips = self._strips[1]
        if strips is None:  # not a plain drawing (an error message): Textual draws it
            return super().render_line(y)
        return strips[y] if 0 <= y < len(strips) else Strip.blank(self.size.width, base.rich_style)

    def render(self) -> RenderResult:
        """The drawing, cached per (data version, size, theme): plotext draws in pure Python,
        so tab switches and unrelated repaints must not redraw a big chart. A chart that
        cannot be drawn shows the error in its place; the app stays up."""
        key = (self._version, self.size.width, self.size.height, self.app.theme)
        if self._rendered is None or self._rendered[0] != key:
            try:
                text = draw_chart(
                    self.chart, log=self.chart is not None and self._use_log(self.chart), marker=self.marker,
                    width=self.size.width, height=self.size.height, theme=self._get_plotext_theme_name(self.app.theme),
                    smoothing=self.smoothing, time_axis=self.time_axis, cursor=self.cursor,
                )
            except Exception as error:  # noqa: BLE001 - the safety net: one bad chart must not end the app
                self.log.error(f"chart {self.id} could not be drawn: {error!r}")
                text = failure_text("this chart", error)
            self._rendered = (key, text)
        return self._rendered[1]


def draw_chart(chart: Chart | None, *, log: bool, marker: int | None, width: int, height: int, theme: str = "default",
               smoothing: float = 0.0, time_axis: bool = False, cursor: int | None = None) -> Text:
    """``chart`` in exactly ``width`` x ``height`` cells (a note when there is nothing to draw): the title,
    the frame drawn by a fresh plotext figure with the labels around it, then the legend or, with a
    ``cursor`` step, what each series recorded nearest it."""
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        return Text(" chart: too small"[: max(0, width)], style="dim")
    if chart is None:  # before the view's first data: words, not a plotext frame (its build costs the first frame)
        return Text("\n").join([Text(" no data yet".ljust(width)[:width], style="dim")] + [Text(" " * width)] * (height - 1))
    bottom = height >= BOTTOM_ROW_FROM
    frame_height = height - 1 - bottom  # plotext's rows: frame top, canvas, frame bottom, (empty) x label row
    rows = frame_height - 3
    x_count = max(2, min(10, (width - 8) // X_LABEL_SPACE))
    y_count = max(2, min(6, rows // 2 + 1))
    data = plot_data(chart, log, marker, x_count, y_count, smoothing=smoothing, time_axis=time_axis, cursor=cursor) if chart is not None else None
    if chart is None or data is None:
        return _nothing(chart, log, width, height, theme)
    ys = y_labels(data.y_axis, rows, min_width=len(data.x_name))
    if len(ys.ticks) < 2 and len(data.y_ends.ticks) == 2 and rows >= 3:  # round values on neighbouring rows: label the ends
        ys = y_labels(data.y_ends, rows, min_width=len(data.x_name))
    if ys.width > width // 3:  # labels that would take the plot's room (a narrow chart, 15-digit labels): none
        ys = y_labels(Axis((), ()), rows, min_width=len(data.x_name))
    margin = ys.width
    xs = x_labels(data.x_axis, width, margin, width - margin - 2, data.x_name)
    plt = _figure(width - margin, frame_height, theme)
    _plot(plt, data, rows, _canvas_rgb(theme), _ticks_color(theme), chart.styles)
    plt.xlim(0.0, 1.0)
    plt.ylim(0.0, 1.0)
    plt.xticks(list(xs.ticks), [""] * len(xs.ticks))
    plt.yticks(list(ys.ticks), [""] * len(ys.ticks))
    body = figure_rows(plt)  # = Text.from_ansi(plt.build()) split in rows, without writing and parsing the ANSI
    style = _style_at_start(body[0])
    title = one_cell_each(_title(chart, data, smoothing), width)
    lines = [_words(title.center(width), style, style + Style(bold=True))]
    for r, row in enumerate(body[:frame_height - 1]):
        lines.append(_words(ys.rows.get(r - 1, "").rjust(margin), style) + row)
    lines.append(_words(xs.row, style))
    if bottom:
        lines.append(_words(one_cell_each(_bottom_row(chart, data, cursor, width), width).ljust(width), style))
    return Text("\n").join(lines)


def drawing_of(inputs: ChartInputs, plotext_theme: str, ansi_theme: Any, get_style: Callable[[str], Style]) -> ChartDrawing:
    """The drawing a :class:`MetricChart` would make from ``inputs`` (``plotext_theme``: its plotext theme's name;
    ``ansi_theme``, ``get_style``: its app's); pure, so a worker can make it. Raises what drawing raises."""
    text = draw_chart(inputs.chart, log=inputs.log, marker=inputs.marker, width=inputs.width, height=inputs.height,
                      theme=plotext_theme, smoothing=inputs.smoothing, time_axis=inputs.time_axis, cursor=inputs.cursor)
    return ChartDrawing(inputs, text, text_strips(text, inputs.base, inputs.width, inputs.height, ansi_theme, get_style))


def _words(text: str, style: Style, word_style: Style | None = None) -> Text:
    """``text`` with its blanks and its words in segments of their own: SVG renderers (rsvg) drop the
    leading blanks of a text run, which moved right-aligned labels and titles in exported screenshots."""
    word_style = word_style if word_style is not None else style + Style(bold=False)
    row = Text()
    for run in re.findall(r" +|[^ ]+", text):
        row.append(run, style if run[0] == " " else word_style)
    return row


def _nothing(chart: Chart | None, log: bool, width: int, height: int, theme: str) -> Text:
    """An empty frame titled with why nothing is drawn."""
    plt = _figure(width, height, theme)
    nothing = ("no data yet" if chart is None or not any(len(x) for _, x, _ in chart.lines)
               else "no positive values to draw in log scale" if log else "no finite values to draw")
    plt.title(one_cell_each(f"{chart.title}: {nothing}" if chart is not None else nothing, width))
    return _built(plt)


def _figure(width: int, height: int, theme: str) -> Plot:
    plt = Plot()
    plt.plotsize(width, height)
    plt._set_size(width, height)  # plotsize caps the size at the terminal's; textual-plotext sets it this way too
    plt.theme(theme)
    return plt


def _style_at_start(row: Text) -> Style:
    """The style plotext gave the row's first cell (the frame: its colours and background)."""
    for span in row.spans:
        if span.start == 0 and span.end > 0:
            return span.style if isinstance(span.style, Style) else Style.parse(str(span.style))
    return Style.null()


def one_cell_each(text: str, max_len: int) -> str:
    """``text`` cleaned for plotext, which gives each character one cell and leaves out a title wider
    than the plot: characters that take two cells or none (CJK, combining marks) become ``?``."""
    text = unicodedata.normalize("NFKC", clean(text, 500))
    return clean("".join(c if cell_len(c) == 1 else "?" for c in text), max_len)


def _built(plt: Plot) -> Text:
    """The figure's one build, as exactly its height in lines."""
    return Text.from_ansi(plt.build().removesuffix("\n"))


def _plot(plt: Plot, data: PlotData, rows: int, canvas: tuple[int, int, int], foreground: object, styles: tuple[int, ...] = ()) -> None:
    """Cursor, lines (faint raw behind each smoothed line), threshold and vertical marks, in unit coordinates
    (``styles``: each line's colour and glyph, :attr:`Chart.styles`)."""
    if data.cursor is not None and rows > 0:  # first: the lines drawn after it stay visible where they cross it
        plt.scatter([data.cursor] * rows, np.linspace(0.0, 1.0, rows).tolist(), marker=CURSOR_GLYPH, color=foreground)
    smoothed = [s if s is not None and len(s) else None for s in data.smoothed] + [None] * (len(data.lines) - len(data.smoothed))
    for i, (_, x, y) in enumerate(data.lines):
        if len(x):
            style = style_of(styles, i)
            color = COLORS[style % len(COLORS)]
            plt.plot(x.tolist(), y.tolist(), marker=GLYPHS[style % len(GLYPHS)], color=_faint(color, canvas) if smoothed[i] is not None else color)
    for i, ((_, x, _), smooth) in enumerate(zip(data.lines, smoothed)):
        if smooth is not None:
            style = style_of(styles, i)
            plt.plot(x.tolist(), smooth.tolist(), marker=GLYPHS[style % len(GLYPHS)], color=COLORS[style % len(COLORS)])
    if data.threshold is not None:
        plt.horizontal_line(data.threshold, color="red")
    for position, kind in data.vlines:
        if kind == FAILED_ACTION:
            plt.scatter([position] * FAILED_MARKS, np.linspace(0.0, 1.0, FAILED_MARKS).tolist(), marker="x", color="red")
        else:
            plt.vertical_line(position, color=VLINE_COLORS[kind])


def _faint(color: tuple[int, int, int], canvas: tuple[int, int, int]) -> tuple[int, int, int]:
    """``color`` moved towards the background: the raw series behind its smoothed line."""
    return tuple(round(b + (c - b) * FAINT) for c, b in zip(color, canvas))  # type: ignore[return-value]


def _theme_colors(theme: str) -> list[object]:
    return list(plotext_themes.get(theme, plotext_themes["default"]))


def _canvas_rgb(theme: str) -> tuple[int, int, int]:
    """The plot's background as RGB (a named or unset one is taken as white or a dark grey)."""
    canvas = _theme_colors(theme)[0]
    if isinstance(canvas, tuple) and len(canvas) == 3:
        return canvas  # type: ignore[return-value]
    return (255, 255, 255) if canvas == "white" else (30, 30, 30)


def _ticks_color(theme: str) -> object:
    """The theme's colour for ticks and labels: the cursor is drawn in it (visible on its background)."""
    color = _theme_colors(theme)[2]
    return color if color != "default" else "white"


def style_of(styles: tuple[int, ...], index: int) -> int:
    """The colour and glyph index of line ``index`` (:attr:`Chart.styles`; by default the line's own index)."""
    return styles[index] if index < len(styles) else index


def glyph_of(index: int) -> str:
    """How the legend writes series ``index``'s glyph."""
    glyph = GLYPHS[index % len(GLYPHS)]
    return LEGEND_GLYPHS.get(glyph, glyph)


def _bottom_row(chart: Chart, data: PlotData, cursor: int | None, width: int) -> str:
    """The cursor's readout, or the legend: each series' glyph and name."""
    labels = [label for label, _, _ in chart.lines]
    glyphs = tuple(glyph_of(style_of(chart.styles, i)) for i in range(len(labels)))
    if cursor is not None:
        lines = tuple((label, x, y) for label, (x, y, _) in zip(labels, data.points))
        samples = readout(lines, float(cursor), tuple(s for _, _, s in data.points))
        elapsed = float(elapsed_at(chart.clock, np.array([float(cursor)]))[0]) if data.x_name == TIME and chart.clock else None
        return " " + readout_text(cursor, samples, glyphs, elapsed, width=width - 1)
    named: dict[str, list[str]] = {}  # lines of one style (a band's two edges) are named together
    for glyph, label in zip(glyphs, labels):
        named.setdefault(glyph, []).append(clean(label, LABEL_CELLS))
    legend = "  ".join(f"{glyph} {'/'.join(group)}" for glyph, group in named.items())
    return " " + legend + ("   faint: raw" if any(s is not None for s in data.smoothed) else "")


def _title(chart: Chart, data: PlotData, smoothing: float) -> str:
    notes = ("  NaN at red line" if chart.nonfinite_steps else "") + ("  live action at green line" if chart.actions else "")
    notes += "  failed action at red x" if chart.failed_actions else ""
    notes += "  resumed at blue line" if chart.resumes else ""
    if data.hidden_nonpositive:
        notes += f"  {data.hidden_nonpositive} non-positive values hidden in log scale"
    if data.dropped_nonfinite:
        notes += f"  {data.dropped_nonfinite} non-finite values not drawn"
    smooth = strength_label(smoothing) if any(s is not None for s in data.smoothed) else ""
    return f"{chart.title}{'  (log)' if data.log else ''}{'  ' + smooth if smooth else ''}{notes}"
