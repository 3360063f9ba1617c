"""The run view draws ahead the charts of the tabs not yet shown, while the view of a run that no longer changes is idle.

A tab's pane is composed when the tab is first shown (``RunScreen._fill``), and its chart drawn then: on a 10M-row
run that drawing (plotext, then its rows as strips) took 20-35 ms of a 40-65 ms first visit. Once the view has
shown the same data and settings for :data:`AHEAD_AFTER` seconds, a worker draws each chart tab not yet composed,
for the size of the chart on screen; each drawing comes back as a message and waits in ``_ahead`` until its tab is
composed, and the chart uses it if it was made from exactly what the chart then shows
(:class:`~tuidiag.app.widgets.chart_drawing.ChartInputs`), or draws itself otherwise.

The view of a live run (status ``running``) draws nothing ahead: its charts change at every refresh, so each
drawing would be thrown away, at the cost of the monitor's idle CPU.

A mixin of :class:`tuidiag.app.screens.run_screen.RunScreen`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rich.style import Style
from textual import work
from textual.message import Message
from textual.timer import Timer
from textual.widgets import TabbedContent
from textual.worker import get_current_worker

from tuidiag.app.run_tabs import CHART_IDS, CHART_TABS
from tuidiag.app.widgets.chart import MetricChart, drawing_of
from tuidiag.app.widgets.chart_drawing import ChartDrawing, ChartInputs
from tuidiag.format import STATUS_RUNNING
from tuidiag.viewmodel.distributions import DIST_CHART
from tuidiag.viewmodel.snapshot import Chart, RunDetail

AHEAD_AFTER = 1.0
"""Seconds the view must stay as it is (no new data, setting, size or tab) before charts are drawn ahead."""


class RunChartsAhead:
    """The run view's drawings made ahead (the screen's state is its own: see ``RunScreen.__init__``)."""

    detail: RunDetail | None
    replay: bool
    smoothing: float
    time_axis: bool
    cursor: int | None
    filled: set[str]
    _ahead: dict[str, ChartDrawing]
    """Drawings made ahead, by tab, until the tab is composed."""
    _ahead_timer: Timer | None
    _chart_of: Callable[[str, RunDetail], Chart]
    _marker: Callable[[], int | None]
    _smoothed: Callable[[str], float]

    @dataclass
    class ChartDrawnAhead(Message):
        """A worker drew the chart of tab ``tab_id`` ahead."""

        tab_id: str
        drawing: ChartDrawing

    def _plan_ahead(self) -> None:
        """The view changed: draw the charts not yet shown once it has stayed as it is for :data:`AHEAD_AFTER` s."""
        if self._ahead_timer is not None:
            self._ahead_timer.stop()
            self._ahead_timer = None
        if self.detail is None or (self.detail.summary.status == STATUS_RUNNING and not self.replay):
            return
        if all(tab.id in self.filled for tab in CHART_TABS):
            return
        self._ahead_timer = self.set_timer(AHEAD_AFTER, self._draw_ahead)  # type: ignore[attr-defined]

    def _ahead_inputs(self) -> tuple[dict[str, ChartInputs], MetricChart | None]:
        """What each chart not yet composed would be drawn from, at the size of the chart on screen (none when the
        tab shown is not a chart), and that chart."""
        active = self.query_one("#charts", TabbedContent).active  # type: ignore[attr-defined]
        if self.detail is None or active not in CHART_IDS or active == DIST_CHART:  # the dist chart may share its pane
            return {}, None
        shown: MetricChart = self.query_one(f"#chart-{active}", MetricChart)  # type: ignore[attr-defined]
        if not shown.size.area:
            return {}, None
        base = shown.visual_style
        wanted: dict[str, ChartInputs] = {}
        for tab in CHART_TABS:
            if tab.id in self.filled or tab.id == DIST_CHART:
                continue
            chart = self._chart_of(tab.id, self.detail)
            inputs = ChartInputs(chart, chart.log_default, self._marker(), self._smoothed(tab.id), self.time_axis, self.cursor,
                                 shown.size.width, shown.size.height, shown.app.theme, base)
            if tab.id not in self._ahead or not self._ahead[tab.id].inputs.same_as(inputs):  # not drawn already
                wanted[tab.id] = inputs
        return wanted, shown

    def _draw_ahead(self) -> None:
        self._ahead_timer = None
        wanted, shown = self._ahead_inputs()
        if wanted and shown is not None:
            app = shown.app
            self._draw_charts_ahead(wanted, shown._get_plotext_theme_name(app.theme), app.ansi_theme, app.console.get_style)

    @work(thread=True, exclusive=True, group="charts-ahead", exit_on_error=False)
    def _draw_charts_ahead(self, wanted: dict[str, ChartInputs], plotext_theme: str, ansi_theme: Any,
                           get_style: Callable[[str], Style]) -> None:
        """Worker: draw each chart of ``wanted`` and post it (a newer plan cancels this one between two charts)."""
        worker = get_current_worker()
        for tab_id, inputs in wanted.items():
            if worker.is_cancelled:
                return
            try:
                drawing = drawing_of(inputs, plotext_theme, ansi_theme, get_style)
            except Exception:  # noqa: BLE001 - the chart draws itself when shown, and shows the error in its place
                continue
            self.post_message(self.ChartDrawnAhead(tab_id, drawing))  # type: ignore[attr-defined]

    def on_run_charts_ahead_chart_drawn_ahead(self, message: ChartDrawnAhead) -> None:
        if message.tab_id not in self.filled:
            self._ahead[message.tab_id] = message.drawing

    def _adopt_ahead(self, tab_id: str) -> None:
        """The chart of tab ``tab_id`` was just composed: hand it the drawing made ahead for it, if any."""
        drawing = self._ahead.pop(tab_id, None)
        if drawing is not None:
            self.query_one(f"#chart-{tab_id}", MetricChart).adopt(drawing)  # type: ignore[attr-defined]
