"""The run view composes a tab's pane when the tab is first shown, and draws it from the data it has then.

Only the first tab's widgets are mounted with the view (mounting every tab's held up the first frame
of a large run: its reader waits for the UI thread). These tests open real runs in the real app and
check, for every tab and every way to show one (its key, a click on the tab bar), that the pane shown
holds the same data as a pane composed at the start would, with the settings chosen before it was
first shown; and that a refresh redraws the panes composed so far and composes no other.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static, TabPane

import tuidiag
from tests.app_helpers import DEMO_RUNS, drawn_text, fixed_clock, wait_for
from tests.conftest import full_only
from tuidiag.app.app import TuidiagApp
from tuidiag.app.run_tabs import CHART_IDS, CHART_TABS, RUN_TABS
from tuidiag.app.screens.run_screen import FIRST_TAB, RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.app.widgets.events_panel import EventsPanel
from tuidiag.app.widgets.layers import LayerHeatmap
from tuidiag.viewmodel.chart_smoothing import STRENGTHS


def _composed(screen: RunScreen) -> set[str]:
    """The tabs whose panes hold widgets."""
    return {tab.id for tab in RUN_TABS if screen.query_one(f"#{tab.id}", TabPane).children}


def _assert_drawn(screen: RunScreen, tab_id: str) -> None:
    """The pane of ``tab_id`` shows what the view's data holds for it."""
    detail = screen.detail
    assert detail is not None
    if tab_id in CHART_IDS:
        chart = screen.query_one(f"#chart-{tab_id}", MetricChart)
        assert chart.chart is not None
        assert chart.chart.title.startswith(detail.charts[tab_id].title)
        assert (chart.smoothing, chart.time_axis, chart.cursor) == (
            screen.smoothing if tab_id in {t.id for t in CHART_TABS if t.smoothed} else 0.0, screen.time_axis, screen.cursor)
    elif tab_id == "layers":
        assert screen.query_one("#layer-grid", LayerHeatmap)._drawn[0] is detail.layers
    elif tab_id == "events-tab":
        panel = screen.query_one("#events", EventsPanel)
        assert panel.row_count == len(detail.events)
    elif tab_id == "jobs-tab":
        assert drawn_text(screen.query_one("#jobs-text", Static)).strip()
    else:
        raise AssertionError(f"a tab this test does not know: {tab_id}")


async def _open(app: TuidiagApp, pilot) -> RunScreen:
    assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=60)
    assert isinstance(app.screen, RunScreen)
    return app.screen


@pytest.mark.parametrize("run", ["vanishing-gradients", pytest.param("lr-too-high", marks=full_only)])
async def test_each_tab_is_composed_when_first_shown_and_drawn_from_the_data(run: str) -> None:
    """Every tab by its key, in an order that is not the bar's, after settings changed on another tab."""
    app = TuidiagApp(DEMO_RUNS / run, clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot)
        assert _composed(screen) == {FIRST_TAB} == screen.filled
        await pilot.press("e", "t", "comma")  # smoothing, time axis, cursor: set before the other charts exist
        assert screen.smoothing != STRENGTHS[2] and screen.time_axis and screen.cursor is not None
        shown = {FIRST_TAB}
        for tab in reversed(RUN_TABS):
            await pilot.press(tab.key)
            shown.add(tab.id)
            assert _composed(screen) == shown  # that tab's pane, no other
            await pilot.pause()
            _assert_drawn(screen, tab.id)
        await pilot.press(RUN_TABS[1].key)  # shown again: composed once
        assert len(screen.query_one(f"#{RUN_TABS[1].id}", TabPane).children) == 1


async def test_a_click_on_the_tab_bar_composes_the_tab() -> None:
    app = TuidiagApp(DEMO_RUNS / "vanishing-gradients", clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot)
        for tab in RUN_TABS[1:]:
            assert await pilot.click(f"#--content-tab-{tab.id}")
            assert await wait_for(pilot, lambda: tab.id in screen.filled)
            await pilot.pause()
            _assert_drawn(screen, tab.id)
        assert _composed(screen) == {tab.id for tab in RUN_TABS}


async def test_a_refresh_redraws_the_composed_panes_and_composes_no_other(tmp_path: Path) -> None:
    """A live run that logs new events while its view is open: the events pane composed earlier lists them,
    the panes never shown stay empty."""
    rec = tuidiag.Recorder(tmp_path / "live", flush_interval=0.1)
    try:
        for _ in range(5):
            rec.step(1.0)
        rec.flush()
        app = TuidiagApp(tmp_path / "live", clock=fixed_clock)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await _open(app, pilot)
            await pilot.press("6", "1")  # the events pane composed, then left
            before = len(screen.detail.events)
            for i in range(3):
                rec.event("note", f"event {i} after the pane was left", step=5 + i)
                rec.step(0.5)
            rec.flush()
            assert await wait_for(pilot, lambda: len(screen.detail.events) == before + 3, timeout=30)
            await pilot.pause()
            assert screen.query_one("#events", EventsPanel).row_count == len(screen.detail.events)
            assert _composed(screen) == {FIRST_TAB, "events-tab"}
    finally:
        rec.close()
