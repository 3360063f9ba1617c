"""SVG snapshots of the overview with a filter and of the compare screen, at 80x24 and 200x50.

Update after an intended change with ``pytest tests/test_snapshots_overview.py --snapshot-update``
and look at the new SVGs (as PNGs) before committing them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from tests.app_helpers import DEMO_RUNS, fixed_clock, run_keys, settled, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.compare import CompareScreen

SIZES = [(80, 24), (200, 50)]


@pytest.fixture
def demo_root(monkeypatch) -> Path:
    monkeypatch.chdir(DEMO_RUNS.parent)
    return Path("demo_runs")


async def _read(pilot, app: TuidiagApp) -> None:
    app.animation_level = "none"
    assert await wait_for(pilot, lambda: settled(app, 5), 60)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview_filtered(snap_compare, demo_root, size) -> None:
    app = TuidiagApp(demo_root, clock=fixed_clock)

    async def run_before(pilot) -> None:
        await _read(pilot, app)
        await pilot.press("s", "s", "slash", "l", "r", "enter")  # sorted by step, 2 of 5 runs
        assert await wait_for(pilot, lambda: app.screen.query_one("#runs", DataTable).row_count == 2)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare(snap_compare, demo_root, size) -> None:
    app = TuidiagApp(demo_root, clock=fixed_clock)

    async def run_before(pilot) -> None:
        await _read(pilot, app)
        table = app.screen.query_one("#runs", DataTable)
        for name in ("lr-too-high", "healthy"):
            table.move_cursor(row=run_keys(app).index(name))
            await pilot.press("space")
        await pilot.press("c")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.view is not None, 60)
        await pilot.pause(0.5)
        await pilot.wait_for_scheduled_animations()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
