"""SVG snapshots of the run view with a job's progress bar, at 80x24 and 200x50 (pytest-textual-snapshot).

The bar shows a fixed :class:`JobView` (no clock, no training), so the pictures are
the same on every machine. Update with ``--snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.viewmodel.job_progress import ARMED, RUNNING, JobView
from tuidiag.viewmodel.snapshot import STATUS_READING

RUNNING_LR = JobView("demo_runs/lr-too-high", "lr_find", "LR finder", RUNNING, 40, 100, 12.0, 18.0)
ARMED_HUNT = JobView("demo_runs/lr-too-high", "nan_hunt", "NaN hunt", ARMED, 50, 200, 6.0, 15.0)


@pytest.fixture
def demo_root(monkeypatch) -> Path:
    monkeypatch.chdir(DEMO_RUNS.parent)
    return Path("demo_runs")


def _with_bar(app: TuidiagApp, view: JobView):
    app.animation_level = "none"

    async def run_before(pilot) -> None:
        assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None
                              and app.screen.detail.summary.status != STATUS_READING, timeout=60)
        app.screen.show_job(view)
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()

    return run_before


def test_run_view_with_a_running_job_80x24(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "lr-too-high", clock=fixed_clock)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_with_bar(app, RUNNING_LR))


def test_run_view_with_a_running_job_200x50(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "lr-too-high", clock=fixed_clock)
    assert snap_compare(app, terminal_size=(200, 50), run_before=_with_bar(app, RUNNING_LR))


def test_run_view_with_an_armed_hunt_80x24(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "lr-too-high", clock=fixed_clock)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_with_bar(app, ARMED_HUNT))
