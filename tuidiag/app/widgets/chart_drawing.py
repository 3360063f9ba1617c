"""A chart drawn ahead of its first showing, and what it was drawn from.

A tab's first visit composes its chart and draws it: 20-35 ms of a 40-65 ms tab switch on a 10M-row run. While a
finished run's view is idle, the run view draws the charts of the tabs not yet shown in a worker
(:mod:`tuidiag.app.screens.run_charts_ahead`); a chart composed later adopts the drawing if it was made from
exactly what the chart would draw from (:meth:`ChartInputs.same_as`), and draws itself otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.strip import Strip
from textual.style import Style

from tuidiag.viewmodel.snapshot import Chart


@dataclass(frozen=True)
class ChartInputs:
    """Everything a chart's drawing depends on: the data and settings, the size in cells, the theme and the
    widget's base style."""

    chart: Chart | None
    log: bool
    marker: int | None
    smoothing: float
    time_axis: bool
    cursor: int | None
    width: int
    height: int
    theme: str
    base: Style

    def same_as(self, other: ChartInputs) -> bool:
        """Whether a drawing from ``other`` is one from these: the same chart object (its arrays are not compared:
        a refresh makes new ones) and equal everything else."""
        return self.chart is other.chart and self._rest() == other._rest()

    def _rest(self) -> tuple[object, ...]:
        return (self.log, self.marker, self.smoothing, self.time_axis, self.cursor, self.width, self.height,
                self.theme, self.base)


@dataclass(frozen=True)
class ChartDrawing:
    """A chart's drawing (``text``) and its rows as strips (None: not a plain drawing), made from ``inputs``."""

    inputs: ChartInputs
    text: Text
    strips: list[Strip] | None
