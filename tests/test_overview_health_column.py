"""The overview keeps the health column longest: only the run's label, shrunk to its least, comes before it.

The regression: at 40x15 the overview hid health and kept status, though health is what the overview is for.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from textual.widgets import DataTable

from tests.conftest import examples
from tests.app_helpers import DEMO_RUNS, fixed_clock, settled, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.overview import COLUMNS, RUN_WIDTH, OverviewScreen, _width
from tuidiag.viewmodel.overview_rows import COLUMN_PADDING, HEALTH, RUN_LEAST, fit_columns, header


def _needs(width: dict[str, int]) -> int:
    """Cells the marks, the run's label at its least and the health column take."""
    return width[""] + min(width["run"], RUN_LEAST) + width[HEALTH] + 3 * COLUMN_PADDING


@settings(max_examples=examples(400), deadline=None)
@given(widths=st.lists(st.integers(1, 40), min_size=len(COLUMNS), max_size=len(COLUMNS)), available=st.integers(30, 200))
def test_health_is_shown_whenever_it_fits_beside_the_run(widths: list[int], available: int) -> None:
    shown, run_width = fit_columns(COLUMNS, widths, available)
    width = dict(zip(COLUMNS, widths))
    assert (HEALTH in shown) == (_needs(width) <= available)
    if HEALTH in shown:  # within the width, the label at least at its least
        used = sum((run_width if c == "run" else width[c]) + COLUMN_PADDING for c in shown)
        assert used <= available and run_width >= min(width["run"], RUN_LEAST)


async def test_the_demo_overview_shows_health_at_every_width_it_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo runs, the terminal from 30 to 200 columns (one app, resized)."""
    monkeypatch.chdir(DEMO_RUNS.parent)
    app = TuidiagApp(Path("demo_runs"), clock=fixed_clock)
    async with app.run_test(size=(200, 15)) as pilot:
        assert await wait_for(pilot, lambda: settled(app, 5), timeout=60)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        table = screen.query_one("#runs", DataTable)
        for width in range(30, 201, 5):
            await pilot.resize_terminal(width, 15)
            assert await wait_for(pilot, lambda: screen._filled_for is not None
                                  and screen._filled_for[0] == screen._available(table))
            columns = screen._columns()
            cells = [screen._cells(s, RUN_WIDTH) for s in screen.summaries]  # as the screen measures them
            widths = {c: max([len(header(c, screen.sort))] + [_width(row[i]) for row in cells]) for i, c in enumerate(columns)}
            headers = [str(column.label).split()[0] if str(column.label).strip() else "" for column in table.columns.values()]
            assert (HEALTH in headers) == (_needs(widths) <= screen._available(table)), (width, headers)
