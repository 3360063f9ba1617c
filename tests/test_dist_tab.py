"""The run view's distribution tab (Pilot): its key, the keys that cycle the distribution, the
chart title naming the one shown, the note of a run without any, and SVG snapshots at 80x24 and 200x50."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static, TabbedContent

import tuidiag
from tests.app_helpers import drawn_text, fixed_clock, wait_for
from tests.dist_runs import write_dist_run
from tests.test_snapshots_screens import SIZES, Shots
from tuidiag.app.app import TuidiagApp
from tuidiag.app.run_tabs import tab_of
from tuidiag.app.screens.run_screen import NEXT_DIST_KEY, PREVIOUS_DIST_KEY, RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.diagnosis.distributions import NO_DISTRIBUTIONS, distribution_label
from tuidiag.viewmodel.distributions import DIST_CHART


@pytest.fixture(scope="module")
def dist_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600 steps: one logged distribution, three parameters' weights and gradients, a gradient spike at step 300."""
    return write_dist_run(tmp_path_factory.mktemp("dist") / "hist", spike_at=300)


async def _loaded(pilot, app: TuidiagApp) -> RunScreen:
    app.animation_level = "none"
    assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=30)
    return app.screen


async def _title_is(pilot, chart: MetricChart, label: str) -> None:
    assert await wait_for(pilot, lambda: chart.chart is not None and chart.chart.title.startswith(label), timeout=15), \
        (chart.chart.title if chart.chart else None, label)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_dist_tab_cycles_the_distributions_and_names_the_one_shown(snapshot, dist_run: Path, size) -> None:
    app = TuidiagApp(dist_run, clock=fixed_clock)
    shots = Shots(snapshot, app, size)
    async with app.run_test(size=size) as pilot:
        screen = await _loaded(pilot, app)
        dists = screen.detail.dists
        assert len(dists) == 7 and dists[0] == "acts/hidden"
        await pilot.press(tab_of(DIST_CHART).key)
        assert screen.query_one("#charts", TabbedContent).active == DIST_CHART
        chart = screen.query_one(f"#chart-{DIST_CHART}", MetricChart)
        await _title_is(pilot, chart, f"{distribution_label(dists[0])} (1/7)")
        assert not screen.query_one("#dist-note", Static).display
        await shots.take(pilot, "first")
        for i in (1, 2):  # the next two: the first parameter's weights, then its gradient
            await pilot.press(NEXT_DIST_KEY)
            await _title_is(pilot, chart, f"{distribution_label(dists[i])} ({i + 1}/7)")
        await shots.take(pilot, "gradient")
        assert "min/max" in drawn_text(chart) and "median" in drawn_text(chart)
        await pilot.press(PREVIOUS_DIST_KEY, PREVIOUS_DIST_KEY, PREVIOUS_DIST_KEY)  # wraps to the last
        await _title_is(pilot, chart, f"{distribution_label(dists[-1])} (7/7)")
        await pilot.press("1", NEXT_DIST_KEY)  # from another tab, the key brings the distribution tab back
        assert screen.query_one("#charts", TabbedContent).active == DIST_CHART
        await _title_is(pilot, chart, f"{distribution_label(dists[0])} (1/7)")
    shots.check()


async def test_a_run_without_distributions_says_how_to_record_them(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "plain", flush_interval=0.05) as rec:
        for step in range(5):
            rec.step(1.0 / (step + 1))
    app = TuidiagApp(tmp_path / "plain", clock=fixed_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _loaded(pilot, app)
        await pilot.press(tab_of(DIST_CHART).key, NEXT_DIST_KEY)
        await pilot.pause()
        note = screen.query_one("#dist-note", Static)
        assert note.display and not screen.query_one(f"#chart-{DIST_CHART}", MetricChart).display
        assert str(note.render()) == NO_DISTRIBUTIONS
        assert any(n.message == NO_DISTRIBUTIONS for n in app._notifications)


async def test_replay_draws_the_distribution_as_of_its_cursor(dist_run: Path) -> None:
    app = TuidiagApp(dist_run, replay=True, clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _loaded(pilot, app)
        await pilot.press(tab_of(DIST_CHART).key, "home")
        await pilot.press(*["right"] * 6)  # the cursor to step 6: the chart may draw no step after it
        assert await wait_for(pilot, lambda: screen.detail.at == 6)
        at = screen.detail.at
        chart = screen.detail.charts[DIST_CHART]
        assert chart.lines and all(x.max() <= at for _, x, _ in chart.lines) and max(x.max() for _, x, _ in chart.lines) == 5
        assert screen.query_one(f"#chart-{DIST_CHART}", MetricChart).chart.title.startswith("acts/hidden")
