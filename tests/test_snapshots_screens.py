"""SVG snapshots of every screen and dialog at 80x24 (the narrow layout) and 200x50 (side by side).

One app per size and flow takes all of its screens in turn (a fresh app per snapshot cost
seconds each): every tab of the run view, one event whole, the full diagnosis (``d``), help,
the job confirmation and the live-action dialog; then compare, and replay at a cursor.

Update after an intended change with ``pytest tests/test_snapshots_screens.py --snapshot-update``
and look at the new SVGs (``rsvg-convert x.svg -o x.png``) before committing them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pytest_textual_snapshot import SVGImageExtension
from textual.widgets import Static

from tests.app_helpers import DEMO_RUNS, fixed_clock, settled, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.run_tabs import RUN_TABS
from tuidiag.app.screens.compare import CompareScreen
from tuidiag.app.screens.event_detail import EventDetailScreen
from tuidiag.app.screens.help import HelpScreen
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.live_action import LiveActionScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.app.widgets.layers import LayerHeatmap
from tuidiag.diagnosis.distributions import NO_DISTRIBUTIONS
from tuidiag.viewmodel.distributions import DIST_CHART
from tuidiag.viewmodel.actions import PastAction, Proposal
from tuidiag.viewmodel.snapshot import STATUS_READING

SIZES = [(80, 24), (200, 50)]


@pytest.fixture
def demo_root(monkeypatch) -> Path:
    monkeypatch.chdir(DEMO_RUNS.parent)
    return Path("demo_runs")


class Shots:
    """Screenshots taken in one app, compared with the stored SVGs at the end (all mismatches named at once)."""

    def __init__(self, snapshot, app: TuidiagApp, size: tuple[int, int]) -> None:
        self.snapshot = snapshot.use_extension(SVGImageExtension)
        self.app, self.size = app, size
        self.taken: list[str] = []
        self.mismatched: list[str] = []

    async def take(self, pilot, name: str) -> None:
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        svg = self.app.export_screenshot()
        shot = name  # the test id holds the size
        self.taken.append(shot)
        if not self.snapshot(name=shot) == svg:
            self.mismatched.append(shot)

    def check(self) -> None:
        assert not self.mismatched, f"snapshots differ: {self.mismatched} (see the snapshot report)"


async def _loaded_run(pilot, app: TuidiagApp) -> RunScreen:
    app.animation_level = "none"
    assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                          and app.screen.detail.summary.status != STATUS_READING, timeout=60)
    return app.screen


async def _charts_drawn(pilot, screen) -> None:
    """Every chart and the heatmap on screen drawn for its current size (never a frame of the old size)."""
    def drawn() -> bool:
        charts = [c for c in screen.query(MetricChart) if c.display and c.size.area]
        grids = [g for g in screen.query(LayerHeatmap) if g.display and g.size.area]
        return (all(c._rendered is not None and c._rendered[0][1:3] == (c.size.width, c.size.height) for c in charts)
                and all(g._drawn is not None and g._drawn[1] == max(10, g.size.width - 2) for g in grids))
    assert await wait_for(pilot, drawn, timeout=30)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_run_view_tabs_and_dialogs(snapshot, demo_root, size) -> None:
    """lr-too-high: each tab, one event, the full diagnosis, help, the job confirmation, the live-action dialog."""
    app = TuidiagApp(demo_root / "lr-too-high", clock=fixed_clock)
    shots = Shots(snapshot, app, size)
    async with app.run_test(size=size) as pilot:
        screen = await _loaded_run(pilot, app)
        for tab in RUN_TABS:
            await pilot.press(tab.key)
            await pilot.pause()
            await _charts_drawn(pilot, screen)
            if tab.id == DIST_CHART:  # lr-too-high has no distributions: one line says how to record them
                note = screen.query_one("#dist-note", Static)
                assert note.display and str(note.render()) == NO_DISTRIBUTIONS
            await shots.take(pilot, f"tab_{tab.key}_{tab.id}")
        await pilot.press("6", "down", "enter")  # the non-finite event, with its list of parameters
        assert await wait_for(pilot, lambda: isinstance(app.screen, EventDetailScreen))
        await shots.take(pilot, "event_detail")
        await pilot.press("escape", "1", "d")
        await shots.take(pilot, "diagnosis_full")
        await pilot.press("d", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        await shots.take(pilot, "help")
        await pilot.press("escape")
        app.push_screen(JobConfirmScreen("lr_find", "python -m tuidiag lr-find demo_runs/lr-too-high --json", "train:build",
                                         "demo_runs/lr-too-high"))
        await shots.take(pilot, "job_confirm")
        await pilot.press("escape")
        proposals = [Proposal("scale the LR by 0.3 (0.3 -> 0.09)", "scale_lr", {"factor": 0.3}),
                     Proposal("clip gradients at 1.0", "clip", {"max_norm": 1.0}), Proposal("save a checkpoint now", "checkpoint")]
        past = (PastAction(120, False, "LR scaled by 0.5 at step 120"),)
        app.push_screen(LiveActionScreen("lr-too-high", "the training process (pid 4242)", proposals, past))
        await shots.take(pilot, "live_action")
    shots.check()
    assert len(shots.taken) == len(RUN_TABS) + 5


@pytest.fixture
def two_runs(tmp_path, monkeypatch) -> Path:
    """lr-too-high and healthy alone (the overview reads two runs, not five)."""
    for name in ("healthy", "lr-too-high"):
        shutil.copytree(DEMO_RUNS / name, tmp_path / "demo_runs" / name)
    monkeypatch.chdir(tmp_path)
    return Path("demo_runs")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_compare_and_replay(snapshot, two_runs, size) -> None:
    """Compare the two runs; then replay lr-too-high with the cursor before the divergence (one app, in replay mode)."""
    app = TuidiagApp(two_runs, replay=True, clock=fixed_clock)
    shots = Shots(snapshot, app, size)
    async with app.run_test(size=size) as pilot:
        app.animation_level = "none"
        assert await wait_for(pilot, lambda: settled(app, 2), timeout=60)
        await pilot.press("space", "down", "space", "c")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        assert await wait_for(pilot, lambda: app.screen.query_one("#cmp-chart-loss", MetricChart).chart is not None)
        await _charts_drawn(pilot, app.screen)
        await shots.take(pilot, "compare")
        await pilot.press("escape", "enter")  # the cursor is on lr-too-high
        screen = await _loaded_run(pilot, app)
        assert screen.replay and screen.key.endswith("lr-too-high")
        await pilot.press("home", "right_square_bracket")  # to the first step where a finding starts
        assert await wait_for(pilot, lambda: screen.at is not None and screen.detail.at == screen.at < screen.detail.steps[1])
        await _charts_drawn(pilot, screen)
        await shots.take(pilot, "replay")
    shots.check()
