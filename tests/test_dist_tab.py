"""The run view's distribution tab (Pilot): its key, the keys that cycle the distribution, the
chart title naming the one shown, and SVG snapshots at 80x24 and 200x50. (A run without distributions:
its note is checked in tests/test_snapshots_screens.py, on lr-too-high's tab 8.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static, TabbedContent

from tests.app_helpers import drawn_text, fixed_clock, wait_for
from tests.dist_runs import write_dist_run
from tests.test_snapshots_screens import SIZES, Shots
from tuidiag.app.app import TuidiagApp
from tuidiag.app.run_tabs import tab_of
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.monitor_keys import NEXT_DIST_KEY, PREVIOUS_DIST_KEY
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.diagnosis.distributions import distribution_label
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
        if size == SIZES[0]:  # the keys once: they do not depend on the size
            await pilot.press(PREVIOUS_DIST_KEY, PREVIOUS_DIST_KEY, PREVIOUS_DIST_KEY)  # wraps to the last
            await _title_is(pilot, chart, f"{distribution_label(dists[-1])} (7/7)")
            await pilot.press("1", NEXT_DIST_KEY)  # from another tab, the key brings the distribution tab back
            assert screen.query_one("#charts", TabbedContent).active == DIST_CHART
            await _title_is(pilot, chart, f"{distribution_label(dists[0])} (1/7)")
    shots.check()



def _tensorboard_with_histograms(directory: Path) -> Path:
    """A TensorBoard log written by tensorboard's own writer: a scalar loss and a histogram (``add_histogram``'s form)."""
    import numpy as np
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(directory))
    for step in range(30):
        values = np.random.default_rng(step).standard_normal(100)
        histogram = HistogramProto(min=float(values.min()), max=float(values.max()), num=100, sum=float(values.sum()),
                                   sum_squares=float((values**2).sum()), bucket_limit=[0.0, 1e12], bucket=[50, 50])
        writer.add_event(Event(wall_time=1_700_000_000.0 + step, step=step, summary=Summary(value=[
            Summary.Value(tag="Loss/train", simple_value=1.0 / (step + 1)), Summary.Value(tag="weights", histo=histogram)])))
    writer.close()
    return directory


async def test_a_tensorboard_run_says_its_histograms_are_not_read_and_a_key_toasts_once(tmp_path: Path) -> None:
    """The Recorder's advice does not fit a TensorBoard user: the note says what is true; h/H pressed again
    while the toast is up shows no second toast."""
    from tuidiag.diagnosis.distributions import FOREIGN_NO_DISTRIBUTIONS, no_distributions

    app = TuidiagApp(_tensorboard_with_histograms(tmp_path / "exp1"), clock=fixed_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _loaded(pilot, app)
        assert screen.detail.summary.source == "tensorboard" and not screen.detail.dists
        await pilot.press(tab_of(DIST_CHART).key)
        note = screen.query_one("#dist-note", Static)
        assert await wait_for(pilot, lambda: note.display and str(note.render()) == FOREIGN_NO_DISTRIBUTIONS["tensorboard"])
        await pilot.press(NEXT_DIST_KEY, NEXT_DIST_KEY, PREVIOUS_DIST_KEY)
        await pilot.pause()
        shown = [n.message for n in app._notifications]
        assert shown.count(FOREIGN_NO_DISTRIBUTIONS["tensorboard"]) == 1, shown
    assert no_distributions("tuidiag").startswith("no distributions recorded: Recorder(")
    assert all("Recorder" not in no_distributions(kind) for kind in ("tensorboard", "wandb", "csv", "other"))
