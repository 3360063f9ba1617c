"""Compare: selected runs overlaid on shared charts, aligned by step."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from tuidiag.app.widgets.chart import MetricChart
from tuidiag.viewmodel.snapshot import Chart

TABS = (("loss", "Train loss"), ("val", "Validation loss"), ("grad", "Grad norm"))


class CompareScreen(Screen):
    """Overlay charts of several runs; ``show(charts)`` redraws."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", tooltip="to the overview"),
                Binding("g", "toggle_log", "Log y", tooltip="log or linear y axis of the chart")]

    def __init__(self, keys: tuple[str, ...]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        yield Static(f" comparing {len(self.keys)} runs (aligned by step)", id="compare-title")
        with TabbedContent(id="compare-tabs"):
            for tab, label in TABS:
                with TabPane(label, id=f"cmp-{tab}"):
                    yield MetricChart(id=f"cmp-chart-{tab}")
        yield Footer()

    def show(self, charts: dict[str, Chart]) -> None:
        """Draw the overlays (kept for ``on_mount`` while the widgets are not there yet)."""
        self._charts = charts
        for tab, _ in TABS:
            try:
                chart = self.query_one(f"#cmp-chart-{tab}", MetricChart)
            except NoMatches:  # before compose finished, or during teardown: on_mount draws them
                return
            chart.show(charts[tab])

    def on_mount(self) -> None:
        if getattr(self, "_charts", None) is not None:
            self.show(self._charts)

    def action_toggle_log(self) -> None:
        active = self.query_one("#compare-tabs", TabbedContent).active
        self.query_one(f"#cmp-chart-{active.removeprefix('cmp-')}", MetricChart).toggle_log()
