"""The overview's trend cell shows the whole loss sparkline, newest cells included, at any width.

The regression: Textual's sparkline measured its height (1) as its width, so the trend column was
sized to its header and the 12-cell line was cropped to its oldest 5 cells, at any terminal width.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from textual.renderables.sparkline import Sparkline
from textual.widgets import DataTable

from tests.conftest import examples
from tests.app_helpers import DEMO_RUNS, drawn_text, fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.app.widgets.trend_sparkline import TrendSparkline

VALUES = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=40)


def _drawn(renderable: object, width: int) -> str:
    console = Console(width=width, color_system=None, legacy_windows=False, file=None)
    with console.capture() as capture:
        console.print(renderable, end="")
    return capture.get()


@settings(max_examples=examples(60), deadline=None)
@given(VALUES, st.integers(1, 12))
def test_a_narrower_trend_is_all_the_data_at_that_width_never_its_oldest_cells(values: list[float], width: int) -> None:
    trend = TrendSparkline(values, width=12)
    assert trend.__rich_measure__(Console(width=200), Console(width=200).options).maximum == 12
    drawn = _drawn(trend, width)
    assert drawn == _drawn(Sparkline(values, width=width), width)
    if values[-1] > max(values[:-1]):  # the newest value is the highest: its cell is the last and full
        assert drawn[-1] == "\N{FULL BLOCK}"


async def test_the_demo_trend_column_shows_each_runs_full_sparkline_at_every_width_it_is_shown() -> None:
    app = TuidiagApp(DEMO_RUNS, clock=fixed_clock)
    async with app.run_test(size=(200, 20)) as pilot:
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        table = screen.query_one("#runs", DataTable)
        assert await wait_for(pilot, lambda: table.row_count >= 5)
        shown_at = []
        for width in (200, 140, 110, 100, 90, 80):
            await pilot.resize_terminal(width, 20)
            await pilot.pause()
            text = drawn_text(table)
            full = {s.name: _drawn(Sparkline(list(s.spark), width=12), 12) for s in screen.summaries if len(s.spark) > 1}
            if "trend" in text.split("\n")[0]:
                shown_at.append(width)
                for name, line in full.items():
                    row = next(r for r in text.split("\n") if f" {name} " in r)
                    assert line in row, (width, name, line, row)
        assert 200 in shown_at and 80 not in shown_at  # the matrix covers both: shown whole, and hidden
