"""A metric chart: plotext through textual-plotext, fed downsampled lines from a snapshot."""

from __future__ import annotations

import math

import numpy as np
from textual.app import RenderResult
from textual_plotext import PlotextPlot

from tuidiag.live.snapshot import Chart
from tuidiag.diagnosis.stats import fmt
from tuidiag.textsafe import clean

COLORS = ("cyan", "orange", "green", "magenta", "blue", "yellow", "white", "gray")
RESUME_COLOR = "blue+"
"""Vertical lines where a later session continued the run."""


class MetricChart(PlotextPlot):
    """One chart; ``show(chart)`` replaces its data, ``log_scale`` toggles the y axis."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.chart: Chart | None = None
        self.log_scale: bool | None = None
        self.marker: int | None = None
        self._version = 0
        """Bumped on every redraw: the rendered text is reused until the data or the size changes."""
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

    def on_resize(self) -> None:
        """Ticks depend on the height: redraw with as many as fit."""
        self.redraw()

    def _tick_count(self) -> int:
        """Y ticks that fit the plot area with a free row between two (plotext would
        otherwise print two labels on one row, and which one wins is not deterministic)."""
        plot_rows = self.size.height - 4  # title, frame top and bottom, x labels
        return max(2, min(5, plot_rows // 2 + 1))

    def render(self) -> RenderResult:
        """plotext's drawing, cached per (data version, size, theme): plotext draws in pure Python,
        so tab switches and unrelated repaints must not redraw a big chart."""
        key = (self._version, self.size.width, self.size.height, self.app.theme)
        if self._rendered is None or self._rendered[0] != key:
            self._rendered = (key, super().render())
        return self._rendered[1]

    def redraw(self) -> None:
        """Rebuild the plot from the current chart."""
        self._version += 1
        plt, chart = self.plt, self.chart
        plt.clear_data()
        plt.clear_figure()
        if chart is None or not any(len(x) for _, x, _ in chart.lines):
            plt.title("no data yet")
            self.refresh()
            return
        use_log = self._use_log(chart) and all((y > 0).all() for _, _, y in chart.lines if len(y))
        for color, (label, x, y) in zip(COLORS, chart.lines):
            if len(x):
                plt.plot(x.tolist(), y.tolist(), label=clean(label, 30), color=color, marker="braille")
        if chart.threshold is not None and math.isfinite(chart.threshold):
            plt.horizontal_line(chart.threshold, color="red")
        for step in chart.nonfinite_steps[:1]:
            plt.vertical_line(step, color="red")
        for step in chart.actions:
            plt.vertical_line(step, color="green")
        values = np.concatenate([y for _, _, y in chart.lines if len(y)])
        column = failed_column(values, use_log, max(2, self.size.height - 4))
        for step in chart.failed_actions if len(column) else ():  # a column of red x: not the NaN's red line
            plt.scatter([step] * len(column), column.tolist(), marker="x", color="red")
        for step in chart.resumes:
            plt.vertical_line(step, color=RESUME_COLOR)
        if self.marker is not None:
            plt.vertical_line(self.marker, color="yellow")
        plt.yscale("log" if use_log else "linear")
        ticks = y_ticks(values, use_log, self._tick_count())
        if ticks:
            plt.yticks(ticks, [fmt(t) for t in ticks])
        notes = ("  NaN at red line" if chart.nonfinite_steps else "") + ("  live action at green line" if chart.actions else "")
        notes += "  failed action at red x" if chart.failed_actions else ""
        notes += "  resumed at blue line" if chart.resumes else ""
        plt.title(f"{chart.title}{'  (log)' if use_log else ''}{notes}")
        self.refresh()


def failed_column(values: np.ndarray, log: bool, rows: int) -> np.ndarray:
    """Y positions, one per plot row across the data's range, for a failed action's column of marks."""
    good = values[np.isfinite(values) & ((values > 0) if log else True)]
    if not len(good):
        return good
    low, high = float(good.min()), float(good.max())
    if low == high:
        return np.array([low])
    return np.geomspace(low, high, rows) if log else np.linspace(low, high, rows)


def y_ticks(values: np.ndarray, log: bool, count: int = 5) -> list[float]:
    """Readable tick positions: decades on a log axis, evenly spaced otherwise."""
    good = values[np.isfinite(values) & ((values > 0) if log else True)]
    if not len(good) or good.min() == good.max():
        return []
    if not log:
        return [float(v) for v in np.linspace(good.min(), good.max(), count)]
    low, high = int(np.floor(np.log10(good.min()))), int(np.ceil(np.log10(good.max())))
    decades = list(range(low, high + 1))
    stride = max(1, len(decades) // count)
    return [10.0**d for d in decades[::stride]]
