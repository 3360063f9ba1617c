"""Compare: the table and verdict of ``tuidiag compare``, and the runs overlaid on shared charts.

The first run marked is *A* (before); each later one is a *B* compared with it. The
title and the verdicts are docked at the top, so they stay in view whatever is shown
below them.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from tuidiag.app.widgets.chart import MetricChart
from tuidiag.text.comparison import render_findings, render_table, render_verdict
from tuidiag.text.safe import literal
from tuidiag.viewmodel.compare_view import COMPARE_CHARTS, CompareView

NUMBERS = "numbers"
TABS = ((NUMBERS, "Numbers", "1"), *((chart.id, chart.label, str(i)) for i, chart in enumerate(COMPARE_CHARTS, 2)))
"""The tabs (id, label, key): the numbers, then one per chart of the view (:data:`tuidiag.viewmodel.compare_view.COMPARE_CHARTS`)."""
CHART_TABS = tuple(tab for tab, _, _ in TABS if tab != NUMBERS)
TALL = 40
"""From this many rows, the Numbers tab also shows the train-loss overlay under the table."""


class CompareScreen(Screen):
    """The comparison of several runs; ``show(view)`` draws it."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", tooltip="to the overview"),
        Binding("g", "toggle_log", "Log y", tooltip="log or linear y axis of the chart"),
        *[Binding(key, f"tab('{tab}')", label, show=False, tooltip=f"the {label.lower()} tab") for tab, label, key in TABS],
    ]

    def __init__(self, keys: tuple[str, ...], names: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.keys = keys
        self.names = names or tuple(Path(k).name for k in keys)
        """How each run is called in the title until the comparison arrives (the overview's names)."""
        self.view: CompareView | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-head"):
            yield Static(self._title(self.names), id="compare-title")
            yield Static(Text(" reading the runs...", style="dim"), id="compare-verdict")
        with TabbedContent(id="compare-tabs", initial=f"cmp-{NUMBERS}"):
            with TabPane("Numbers [1]", id=f"cmp-{NUMBERS}"):
                with VerticalScroll(id="compare-numbers"):
                    yield Static(id="compare-table")
                yield MetricChart(id=f"cmp-chart-{NUMBERS}")
            for tab, label, key in TABS[1:]:
                with TabPane(f"{label} [{key}]", id=f"cmp-{tab}"):
                    yield MetricChart(id=f"cmp-chart-{tab}")
        yield Footer()

    def show(self, view: CompareView) -> None:
        """Draw the comparison (kept for ``on_mount`` while the widgets are not there yet)."""
        self.view = view
        try:
            self.query_one("#compare-title", Static).update(self._title(view.names, len(view.unreadable)))
        except NoMatches:  # before compose finished, or during teardown: on_mount draws it
            return
        self.query_one("#compare-verdict", Static).update(_verdicts(view))
        self.query_one("#compare-table", Static).update(_numbers(view))
        for tab in CHART_TABS:
            self.query_one(f"#cmp-chart-{tab}", MetricChart).show(view.charts[tab])
        self.query_one(f"#cmp-chart-{NUMBERS}", MetricChart).show(view.charts[COMPARE_CHARTS[0].id])

    def on_mount(self) -> None:
        self.set_class(self.app.size.height < TALL, "short")
        if self.view is not None:
            self.show(self.view)

    def on_resize(self) -> None:
        self.set_class(self.size.height < TALL, "short")

    @staticmethod
    def _title(names: tuple[str, ...], unreadable: int = 0) -> Text:
        title = Text(" compare ", style="bold")
        for i, name in enumerate(names):
            title.append("  A: " if i == 0 else f"  B{'' if len(names) == 2 else i}: ", style="bold magenta")
            title.append_text(literal(name, "bold", 40))
        if unreadable:
            title.append(f"  ({unreadable} not readable)", style="yellow")
        title.append("  (A: before, first marked)", style="dim")
        return title

    def action_tab(self, tab: str) -> None:
        self.query_one("#compare-tabs", TabbedContent).active = f"cmp-{tab}"

    def action_toggle_log(self) -> None:
        active = self.query_one("#compare-tabs", TabbedContent).active.removeprefix("cmp-")
        if active in CHART_TABS or not self.has_class("short"):
            self.query_one(f"#cmp-chart-{active}", MetricChart).toggle_log()
        else:
            self.notify("g switches a chart's scale: show a chart with 2, 3 or 4")


def _verdicts(view: CompareView) -> RenderableType:
    """One verdict line per B (named when there are several)."""
    if not view.comparisons:
        return Text(" fewer than two of these runs could be read: nothing to compare", style="yellow")
    lines = []
    for i, result in enumerate(view.comparisons, start=1):
        line = Text(" ")
        if len(view.comparisons) > 1:
            line.append(f"B{i} ", style="bold magenta")
            line.append_text(literal(result.b["name"], "bold", 40))
            line.append(": ")
        line.append_text(render_verdict(result))
        lines.append(line)
    return Group(*lines)


def _numbers(view: CompareView) -> RenderableType:
    """The table and findings of ``tuidiag compare`` for A against each B."""
    if not view.comparisons:
        return Text("select two or more readable runs with Space in the overview, then press c", style="dim")
    parts: list[RenderableType] = []
    for result in view.comparisons:
        parts += [render_table(result), render_findings(result)]
    return Group(*parts)
