"""How the run view draws its charts: the rank mode, the smoothing, the x axis, the chart cursor, the log scale.

A mixin of :class:`tuidiag.app.screens.run_screen.RunScreen`: each key changes one
setting and every chart is drawn again with it (:meth:`RunChartViews._chart_views`).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable

from rich.text import Text
from textual.widgets import Static, TabbedContent

from tuidiag.app.run_tabs import CHART_IDS, CHART_TABS
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.viewmodel.chart_cursor import move_cursor
from tuidiag.viewmodel.chart_smoothing import STRENGTHS, next_strength
from tuidiag.diagnosis.distributions import no_distributions
from tuidiag.monitor_keys import NEXT_DIST_KEY, PREVIOUS_DIST_KEY
from tuidiag.viewmodel.distributions import DIST_CHART, next_distribution, shown_distribution
from tuidiag.viewmodel.ranks import DEFAULT, chart_for_mode, rank_modes
from tuidiag.viewmodel.snapshot import Chart, RunDetail

SMOOTHED_TABS = tuple(tab.id for tab in CHART_TABS if tab.smoothed)
"""Charts the smoothing key smooths (:attr:`tuidiag.app.run_tabs.RunTab.smoothed`)."""
DEFAULT_SMOOTHING = STRENGTHS[2]
"""0.9: a chart is 100-200 columns, not TensorBoard's 1000 points, so its default 0.6 would barely
show; 0.9 spreads over about one percent of the run, a column or two, and noisy losses read as a line."""


class RunChartViews:
    """The run view's chart settings (the screen's state is its own: see ``RunScreen.__init__``)."""

    detail: RunDetail | None
    rank_mode: int
    smoothing: float
    time_axis: bool
    cursor: int | None
    dist: str | None
    filled: set[str]
    """The tabs whose panes are composed (``RunScreen._fill``): only their charts are drawn."""
    _update: Callable[..., None]
    """Sets a ``Static``'s text when it changed (``RunScreen._update``)."""
    _toasts: dict[str, float]
    """When each message of :meth:`_notify_once` was last shown."""
    _plan_ahead: Callable[[], None]
    """Draws the charts not yet shown once the view stays as it is (``RunChartsAhead._plan_ahead``)."""

    def _notify_once(self, message: str) -> None:
        """Show ``message`` as a toast unless the same one is still on screen (a key pressed again)."""
        now = time.monotonic()
        if now - self._toasts.get(message, -math.inf) < self.app.NOTIFICATION_TIMEOUT:
            return
        self._toasts[message] = now
        self.notify(message)

    def _show_charts(self, detail: RunDetail) -> None:
        """Every composed chart drawn from ``detail``, with the current settings."""
        for tab in CHART_TABS:
            if tab.id in self.filled:
                self._show_chart(tab.id, detail)
        self._chart_views()

    def _chart_of(self, tab_id: str, detail: RunDetail) -> Chart:
        """The chart tab ``tab_id`` shows of ``detail``, in the current rank mode."""
        modes = rank_modes(detail.ranks.ranks) if detail.ranks else (DEFAULT,)
        mode = modes[self.rank_mode % len(modes)]
        chart = chart_for_mode(detail.charts[tab_id], detail.ranks, tab_id, mode)
        if tab_id == DIST_CHART and len(detail.dists) > 1:
            chart = replace(chart, title=f"{chart.title}  {NEXT_DIST_KEY}/{PREVIOUS_DIST_KEY}: next/previous")
        return chart

    def _smoothed(self, tab_id: str) -> float:
        """The smoothing of tab ``tab_id``'s chart (0: a chart that is never smoothed)."""
        return self.smoothing if tab_id in SMOOTHED_TABS else 0.0

    def _show_chart(self, tab_id: str, detail: RunDetail) -> None:
        """The chart of tab ``tab_id`` (composed) drawn from ``detail`` in the current rank mode."""
        self.query_one(f"#chart-{tab_id}", MetricChart).show(self._chart_of(tab_id, detail), self._marker())
        if tab_id == DIST_CHART:
            self.query_one("#dist-note", Static).display = not detail.dists
            self.query_one(f"#chart-{DIST_CHART}", MetricChart).display = bool(detail.dists)
            if not detail.dists:
                self._update("#dist-note", Text(no_distributions(detail.summary.source)))  # set once, not at every refresh

    def action_distribution(self, direction: int) -> None:
        """Show the next (``direction`` 1) or previous (-1) distribution of the run in the distribution tab."""
        if self.detail is None or not self.detail.dists:
            self._notify_once(no_distributions(self.detail.summary.source if self.detail else "tuidiag"))
            return
        shown = shown_distribution(self.detail.dists, self.dist)
        self.dist = next_distribution(self.detail.dists, shown, direction)
        if self.query_one("#charts", TabbedContent).active != DIST_CHART:
            self.action_tab(DIST_CHART)
        self.post_message(self.DistributionChanged(self.key, self.dist))

    def _chart_views(self) -> None:
        """Every composed chart with the current smoothing, x axis and cursor."""
        for tab in CHART_TABS:
            if tab.id not in self.filled:
                continue
            self.query_one(f"#chart-{tab.id}", MetricChart).view(smoothing=self._smoothed(tab.id), time_axis=self.time_axis,
                                                                 cursor=self.cursor)
        self._plan_ahead()

    def action_smoothing(self) -> None:
        """Cycle the EMA smoothing of the loss, grad-norm and update charts: off, 0.6, 0.9, 0.99."""
        self.smoothing = next_strength(self.smoothing)
        self._chart_views()

    def action_time_axis(self) -> None:
        """Switch the charts' x axis between the step and the wall-clock time since the first step."""
        if self.detail is not None and not self.time_axis and all(c.clock is None for c in self.detail.charts.values()):
            self.notify("no wall times recorded: the x axis stays the step")
            return
        self.time_axis = not self.time_axis
        self._chart_views()

    def action_cursor(self, direction: int, big: bool = False) -> None:
        """Show the chart cursor (at the newest step), or move it one chart column (ten when ``big``)."""
        if self.detail is None:
            return
        first, last = self.detail.steps
        active = self.query_one("#charts", TabbedContent).active
        widget = self.query_one(f"#chart-{active}", MetricChart) if active in CHART_IDS else None
        columns = max(10, (widget.size.width if widget is not None else self.size.width) - 8)
        self.cursor = move_cursor(self.cursor, first, last, columns, direction, big)
        self._chart_views()

    def action_rank_mode(self) -> None:
        """Cycle the loss and grad-norm charts of a multi-rank run: default, all ranks, spread, each rank."""
        if self.detail is None or self.detail.ranks is None:
            self.notify("one rank only: nothing to switch")
            return
        self.rank_mode = (self.rank_mode + 1) % len(rank_modes(self.detail.ranks.ranks))
        self._show_charts(self.detail)

    def action_toggle_log(self) -> None:
        active = self.query_one("#charts", TabbedContent).active
        if active in CHART_IDS:
            self.query_one(f"#chart-{active}", MetricChart).toggle_log()
