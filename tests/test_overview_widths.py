"""A run first listed as 'reading' and then read keeps nothing truncated: updated cells widen their columns."""

from __future__ import annotations

from rich.text import Text
from textual.app import App
from textual.widgets import DataTable

from tests.app_helpers import DEMO_RUNS, FIXED_NOW
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.viewmodel.snapshot import reading_summary, summarize


async def test_cells_updated_in_place_widen_their_columns() -> None:
    runs = [open_run(DEMO_RUNS / name) for name in ("healthy", "lr-too-high")]
    read = [summarize(run, diagnose(run), now=FIXED_NOW) for run in runs]
    reading = [reading_summary(s.key, s.name, 2.0) for s in read]
    app = App()
    async with app.run_test(size=(160, 24)) as pilot:
        screen = OverviewScreen()
        await app.push_screen(screen)
        screen.show(reading, "demo_runs")
        await pilot.pause()
        screen.show(read, "demo_runs")  # the same rows in the same order: cells are updated in place
        await pilot.pause()
        table = screen.query_one("#runs", DataTable)
        for row in range(table.row_count):
            for column, width in enumerate(c.content_width for c in table.ordered_columns):
                cell = table.get_cell_at((row, column))
                needed = cell.cell_len if isinstance(cell, Text) else 0
                assert needed <= width, (row, column, str(cell), width)
