"""A metric chart: plotext through textual-plotext, fed downsampled lines from a snapshot.

Every drawing starts from a fresh plotext figure built from the chart alone
(:func:`draw_chart`): plotext changes a figure's state while it builds it (its
log scale is applied to the stored data in place), so a figure is never built
twice. The log transform, the axis ranges and the ticks are computed on copies
by :mod:`tuidiag.viewmodel.chart_axes`, and plotext only draws numbers in [0, 1].
"""

from __future__ import annotations

import unicodedata

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from tuidiag.app.widgets.guard import failure_text
from tuidiag.viewmodel.chart_axes import ACTION, FAILED_ACTION, MARKER, NONFINITE, RESUME, PlotData, plot_data
from tuidiag.viewmodel.snapshot import Chart
from tuidiag.text.safe import clean

COLORS = ("cyan", "orange", "green", "magenta", "blue", "yellow", "white", "gray")
VLINE_COLORS = {NONFINITE: "red", ACTION: "green", RESUME: "blue+", MARKER: "yellow"}
"""Vertical lines: the first non-finite step, live actions that held, resumed sessions, the replay cursor."""
MIN_WIDTH, MIN_HEIGHT = 12, 5
"""Below this, a chart shows a one-line note instead of a plot."""
FAILED_MARKS = 12
"""Red x marks stacked over the plot's height where a live action failed (not the NaN's red line)."""


class MetricChart(PlotextPlot):
    """One chart; ``show(chart)`` replaces its data, ``log_scale`` toggles the y axis."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.chart: Chart | None = None
        self.log_scale: bool | None = None
        self.marker: int | None = None
        self._version = 0
        """Bumped on every change of data, marker or scale: the drawing is reused until it or the size changes."""
        self._rendered: tuple[tuple[object, ...], RenderResult] | None = None

    def show(self, chart: Chart, marker: int | None = None) -> None:
        """Draw ``chart`` (and a vertical marker at step ``marker``); nothing to do when both are unchanged."""
        if chart is self.chart and marker == self.marker:
            return
        self.chart, self.marker = chart, marker
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
                )
            except Exception as error:  # noqa: BLE001 - the safety net: one bad chart must not end the app
                self.log.error(f"chart {self.id} could not be drawn: {error!r}")
                text = failure_text("this chart", error)
            self._rendered = (key, text)
        return self._rendered[1]


def tick_counts(width: int, height: int) -> tuple[int, int]:
    """x and y ticks that fit: y labels with a free row between two (plotext would otherwise
    print two labels on one row, and which one wins is not deterministic), x labels apart."""
    plot_rows = height - 4  # title, frame top and bottom, x labels
    return max(2, min(5, (width - 10) // 12)), max(2, min(5, plot_rows // 2 + 1))


def draw_chart(chart: Chart | None, *, log: bool, marker: int | None, width: int, height: int, theme: str = "default") -> Text:
    """``chart`` drawn by a fresh plotext figure of ``width`` x ``height`` cells (a note when there is nothing to draw)."""
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        return Text(" chart: too small"[: max(0, width)], style="dim")
    x_ticks, y_ticks = tick_counts(width, height)
    data = plot_data(chart, log, marker, x_ticks, y_ticks) if chart is not None else None
    plt = Plot()
    plt.plotsize(width, height)
    plt._set_size(width, height)  # plotsize caps the size at the terminal's; textual-plotext sets it this way too
    plt.theme(theme)
    if data is None:
        nothing = ("no data yet" if chart is None or not any(len(x) for _, x, _ in chart.lines)
                   else "no positive values to draw in log scale" if log else "no finite values to draw")
        plt.title(one_cell_each(f"{chart.title}: {nothing}" if chart is not None else nothing, width))
        return _built(plt)
    _plot(plt, data)
    plt.title(one_cell_each(_title(chart, data), width))
    return _built(plt)


def one_cell_each(text: str, max_len: int) -> str:
    """``text`` cleaned for plotext, which gives each character one cell and leaves out a title wider
    than the plot: characters that take two cells or none (CJK, combining marks) become ``?``."""
    text = unicodedata.normalize("NFKC", clean(text, 500))
    return clean("".join(c if cell_len(c) == 1 else "?" for c in text), max_len)


def _built(plt: Plot) -> Text:
    """The figure's one build, as exactly its height in lines."""
    return Text.from_ansi(plt.build().removesuffix("\n"))


def _plot(plt: Plot, data: PlotData) -> None:
    """Lines, threshold, vertical marks and ticks, all in unit coordinates."""
    for color, (label, x, y) in zip(COLORS, data.lines):
        if len(x):
            plt.plot(x.tolist(), y.tolist(), label=one_cell_each(label, 30), color=color, marker="braille")
    if data.threshold is not None:
        plt.horizontal_line(data.threshold, color="red")
    for position, kind in data.vlines:
        if kind == FAILED_ACTION:
            plt.scatter([position] * FAILED_MARKS, np.linspace(0.0, 1.0, FAILED_MARKS).tolist(), marker="x", color="red")
        else:
            plt.vertical_line(position, color=VLINE_COLORS[kind])
    plt.xlim(0.0, 1.0)
    plt.ylim(0.0, 1.0)
    plt.xticks(list(data.x_axis.ticks), list(data.x_axis.labels))
    plt.yticks(list(data.y_axis.ticks), list(data.y_axis.labels))


def _title(chart: Chart, data: PlotData) -> str:
    notes = ("  NaN at red line" if chart.nonfinite_steps else "") + ("  live action at green line" if chart.actions else "")
    notes += "  failed action at red x" if chart.failed_actions else ""
    notes += "  resumed at blue line" if chart.resumes else ""
    if data.hidden_nonpositive:
        notes += f"  {data.hidden_nonpositive} non-positive values hidden in log scale"
    if data.dropped_nonfinite:
        notes += f"  {data.dropped_nonfinite} non-finite values not drawn"
    return f"{chart.title}{'  (log)' if data.log else ''}{notes}"
