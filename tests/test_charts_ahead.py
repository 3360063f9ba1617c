"""Charts drawn ahead (``tuidiag.app.screens.run_charts_ahead``): a tab first shown uses a drawing made while the view
was idle only if it is the drawing the chart would make itself, whatever changed in between.

For a finished run, every chart tab not yet shown is drawn ahead; then, after each kind of change a user can make
before showing a tab (none, the smoothing, the x axis, the cursor, the terminal's size), each chart shown draws
exactly what a chart drawn from scratch draws, at its size. A live run draws nothing ahead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tuidiag
from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tests.conftest import full_only
from tuidiag.app.app import TuidiagApp
from tuidiag.app.run_tabs import CHART_TABS
from tuidiag.app.screens import run_charts_ahead
from tuidiag.app.screens.run_screen import FIRST_TAB, RunScreen
from tuidiag.app.widgets.chart import MetricChart, drawing_of
from tuidiag.format import STATUS_RUNNING
from tuidiag.viewmodel.distributions import DIST_CHART

AHEAD = [tab for tab in CHART_TABS if tab.id not in {FIRST_TAB, DIST_CHART}]
"""The tabs drawn ahead: every chart tab but the one the view opens on and the distributions."""
CHANGES = {"none": (), "smoothing": ("e",), "x axis": ("t",), "cursor": ("comma", "comma"), "size": ()}
FULL_ONLY = {"x axis", "cursor"}
"""Settings like the smoothing (one of the inputs compared): by default the smoothing stands for them."""


def _rows(strips) -> list[list[tuple[str, object]]]:
    return [[(segment.text, segment.style) for segment in strip] for strip in strips]


@pytest.fixture(autouse=True)
def soon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_charts_ahead, "AHEAD_AFTER", 0.05)  # not a second: the test waits on the drawings


@pytest.mark.parametrize("change", [pytest.param(c, marks=full_only) if c in FULL_ONLY else c for c in CHANGES])
async def test_a_chart_shows_what_it_would_draw_itself_after_any_change(change: str) -> None:
    app = TuidiagApp(DEMO_RUNS / "lr-too-high", clock=fixed_clock)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                              and app.screen.detail.diagnosis.step is not None, timeout=60)
        screen = app.screen
        assert await wait_for(pilot, lambda: set(screen._ahead) == {tab.id for tab in AHEAD}), screen._ahead.keys()
        drawn_ahead = dict(screen._ahead)
        await pilot.press(*CHANGES[change])
        if change == "size":
            await pilot.resize_terminal(150, 44)
        await pilot.pause()
        for tab in AHEAD:
            await pilot.press(tab.key)
            chart = screen.query_one(f"#chart-{tab.id}", MetricChart)
            assert await wait_for(pilot, lambda: chart._strips is not None and chart._strips[0][1:3] == tuple(chart.size))
            fresh = drawing_of(chart.inputs(chart.visual_style), chart._get_plotext_theme_name(app.theme), app.ansi_theme,
                               app.console.get_style)
            assert _rows(chart._strips[1]) == _rows(fresh.strips), (change, tab.id)
            if change == "none":  # nothing changed: the drawing made ahead is the one shown
                assert chart._strips[1] is drawn_ahead[tab.id].strips, tab.id


async def test_a_live_run_draws_nothing_ahead(tmp_path: Path) -> None:
    rec = tuidiag.Recorder(tmp_path / "live", flush_interval=0.1)
    try:
        for i in range(20):
            rec.step(1.0 / (i + 1))
        rec.flush()
        app = TuidiagApp(tmp_path / "live")  # the real clock: the run is live now
        async with app.run_test(size=(120, 36)) as pilot:
            assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
            screen = app.screen
            assert screen.detail.summary.status == STATUS_RUNNING
            await pilot.press("e")  # a setting changed: the view is drawn again, and plans nothing
            await pilot.pause()
            assert screen._ahead_timer is None and not screen._ahead
    finally:
        rec.close()
