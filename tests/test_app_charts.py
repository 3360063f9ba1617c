"""Pilot tests of the run view's chart keys: e smoothing, t step/time axis, , . < > the cursor, esc.

Issue 16 ("charts that read at a glance"): each key changes what every chart draws,
and the cursor's readout names what the run recorded at the nearest step. (A run
without wall times keeps the step axis: tests/test_chart_view.py draws that case.)
"""

from __future__ import annotations

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.format import LOSS
from tuidiag.store import Run
from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.chart_cursor import BIG_MOVE
from tuidiag.viewmodel.snapshot import STATUS_READING


def _chart(app, tab: str) -> MetricChart:
    return app.screen.query_one(f"#chart-{tab}", MetricChart)


def _rows(app, tab: str = "loss") -> list[str]:
    """What the chart of ``tab`` draws now (it must be the tab shown: a hidden one has no size)."""
    return _chart(app, tab).render().plain.split("\n")


async def test_chart_keys_smooth_switch_the_axis_and_move_a_cursor_true_to_the_data() -> None:
    run_dir = DEMO_RUNS / "healthy"
    run = Run(run_dir)
    run.refresh()
    loss = run.series(LOSS)
    app = TuidiagApp(run_dir, clock=fixed_clock)
    async with app.run_test(size=(110, 32)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                              and app.screen.detail.summary.status != STATUS_READING)
        screen = app.screen
        await pilot.pause(0.2)
        assert "loss  EMA 0.9" in _rows(app)[0]  # smoothed from the start
        assert _rows(app)[-2].split()[0] == "step"

        await pilot.press("e")
        assert screen.smoothing == 0.99 and "EMA 0.99" in _rows(app)[0]
        await pilot.press("e")
        assert screen.smoothing == 0.0 and "EMA" not in _rows(app)[0] and "faint: raw" not in _rows(app)[-1]
        await pilot.press("3")  # the LR chart is never smoothed
        await pilot.press("e")
        assert "EMA" not in _rows(app, "lr")[0]
        await pilot.press("1")
        assert "EMA 0.6" in _rows(app)[0]

        await pilot.press("t")
        assert _rows(app)[-2].split()[0] == "time"
        await pilot.press("2")  # a chart first shown after the key has its setting too
        assert _chart(app, "grad").time_axis and _rows(app, "grad")[-2].split()[0] == "time"
        await pilot.press("1", "t")
        assert _rows(app)[-2].split()[0] == "step"

        first, last = screen.detail.steps
        await pilot.press("comma")  # the cursor appears at the newest step
        assert screen.cursor == last
        await pilot.press("comma", "comma", "less_than_sign")
        columns = max(10, screen.query_one("#chart-loss", MetricChart).size.width - 8)
        per_column = max(1, round((last - first) / columns))
        assert screen.cursor == last - per_column * (2 + BIG_MOVE)
        await pilot.press("full_stop")
        assert screen.cursor == last - per_column * (1 + BIG_MOVE)
        readout = _rows(app)[-1]
        assert readout.startswith(f" step {screen.cursor}"), readout
        shown = readout.split("⠤ train ")[1].split()[0]
        at = readout.split("@")[1].split()[0] if "@" in readout.split("• val")[0] else str(screen.cursor)
        recorded = dict(zip(loss.steps.tolist(), loss.values.tolist()))
        assert shown == fmt(recorded[int(at)])  # the value the run recorded at the step it names
        assert "┊" in "\n".join(_rows(app)[1:-2]) and _chart(app, "grad").cursor == screen.cursor

        await pilot.press("escape")  # esc hides the cursor first
        assert isinstance(app.screen, RunScreen) and screen.cursor is None and "⠤ train  • val" in _rows(app)[-1]
        await pilot.press("escape")  # then leaves
        assert isinstance(app.screen, OverviewScreen)
