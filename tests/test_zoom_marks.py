"""A zoom's step axis is the window's: no mark, event marker or cursor outside the window widens it.

The regression: on demo lr-too-high with the event marker on its last event (the NaN at step 254),
``z`` ``Left`` said "steps 0 to 127" but the x axis stayed 0 to 250 and the data filled its left half.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tests.app_helpers import DEMO_RUNS, drawn_text, fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.viewmodel.chart_axes import plot_data
from tuidiag.viewmodel.detail import marks_within
from tuidiag.viewmodel.snapshot import Chart

STEPS = st.integers(0, 10_000)
MARKS = st.lists(STEPS, max_size=4).map(lambda s: tuple(sorted(set(s))))


@settings(max_examples=examples(80), deadline=None)
@given(lo=st.integers(0, 5_000), span=st.integers(2, 5_000), nonfinite=MARKS, actions=MARKS, failed=MARKS,
       resumes=MARKS, marker=st.none() | STEPS, cursor=st.none() | STEPS, zoomed=st.booleans())
def test_only_marks_inside_the_window_set_the_step_axis(lo: int, span: int, nonfinite: tuple[int, ...], actions: tuple[int, ...],
                                                       failed: tuple[int, ...], resumes: tuple[int, ...], marker: int | None,
                                                       cursor: int | None, zoomed: bool) -> None:
    hi = lo + span
    x = np.arange(lo, hi + 1, max(1, span // 50))
    chart = Chart("loss", (("train", x, np.linspace(1.0, 2.0, len(x))),), nonfinite_steps=nonfinite, actions=actions,
                  failed_actions=failed, resumes=resumes)
    window = (lo, hi) if zoomed else None
    data = plot_data(marks_within({"loss": chart}, window)["loss"], log=False, marker=marker, cursor=cursor)
    assert data is not None
    def inside(steps: tuple[int, ...] | list[int]) -> list[int]:
        return [s for s in steps if lo <= s <= hi] if zoomed else list(steps)

    marker_at = [marker] if marker is not None else []
    marks = inside(nonfinite)[:1] + inside(actions) + inside(failed) + inside(resumes) + inside(marker_at)  # the first NaN only
    cursor = (inside([cursor]) or [None])[0] if cursor is not None else None
    shown = [*x.tolist(), *marks, *([cursor] if cursor is not None else [])]
    x_lo, x_hi = min(shown), max(shown)
    assert np.allclose(data.lines[0][1], (x - x_lo) / (x_hi - x_lo))  # the axis spans exactly what is drawn
    assert len(data.vlines) == len(marks) and all(0.0 <= v <= 1.0 for v, _ in data.vlines)
    assert (data.cursor is None) == (cursor is None)
    if zoomed:
        assert lo <= x_lo and x_hi <= hi  # nothing outside the window widens the axis


async def test_zoom_left_on_lr_too_high_with_the_marker_on_its_nan_shows_the_window() -> None:
    app = TuidiagApp(DEMO_RUNS / "lr-too-high", clock=fixed_clock)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        screen = app.screen
        last = max(screen.detail.marks)
        for _ in screen.detail.marks:
            await pilot.press("]")  # on to the last event: the NaN at the run's end
        assert screen.marker == last
        await pilot.press("1", "z", "left")
        chart = screen.query_one("#chart-loss", MetricChart)
        assert await wait_for(pilot, lambda: chart.chart is not None and chart.chart.window == screen.window)
        lo, hi = screen.window
        assert hi < last
        axis = next(line for line in drawn_text(chart).split("\n") if line.startswith("step"))
        labels = [int(word.replace(",", "")) for word in axis.split()[1:]]
        assert labels and labels[0] >= lo and hi - 30 <= labels[-1] <= hi, axis  # the window's steps, not the run's
