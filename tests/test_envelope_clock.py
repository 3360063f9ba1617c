"""A run drawn from its envelopes has a wall-clock x axis too, from its shards' footers.

A review pressed ``t`` on a live run of the recorder's own format and read "no wall times recorded:
the x axis stays the step", while every row has its wall time: the run view of such a run is drawn
from envelopes (its rows never read), whose charts had no clock. The clock now comes from each
metrics shard's row-group statistics (first and last step and wall time of each group). These
tests write real runs through the recorder (one shard, many flushes, compacted) and check that
every mark is when its step was recorded, then press ``t`` in the real app.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import tuidiag
from tests.app_helpers import wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.format import LOSS
from tuidiag.store import open_run
from tuidiag.store.envelope_run import open_envelopes
from tuidiag.store.shards import compact_all
from tuidiag.viewmodel.envelope_view import envelope_charts


def _record(run_dir: Path, steps: int, flushes: int) -> None:
    """``steps`` steps through the recorder, flushed ``flushes`` times, a few milliseconds apart."""
    with tuidiag.Recorder(run_dir, flush_interval=3600) as rec:
        for step in range(steps):
            rec.step(1.0 / (step + 1))
            if (step + 1) % max(1, steps // flushes) == 0:
                rec.flush()
                time.sleep(0.005)


@pytest.mark.parametrize("compacted", [False, True])
@pytest.mark.parametrize("flushes", [1, 6, 40])
def test_each_mark_is_when_its_step_was_recorded(tmp_path: Path, flushes: int, compacted: bool) -> None:
    run_dir = tmp_path / "run"
    _record(run_dir, 200, flushes)
    if compacted:
        compact_all(run_dir, 0)
    steps, walls = open_envelopes(run_dir).wall_marks()
    assert len(steps) >= 2 and steps.min() == 0 and steps.max() == 199
    rows = open_run(run_dir).series(LOSS)
    recorded = dict(zip(rows.steps.tolist(), rows.wall_times.tolist()))
    for step, wall in zip(steps.tolist(), walls.tolist()):
        assert recorded[int(step)] == pytest.approx(wall, abs=1e-6), step
    order = np.argsort(steps, kind="stable")
    assert np.all(np.diff(walls[order]) >= 0)  # later steps, later times
    clock = envelope_charts(open_envelopes(run_dir), 100)["loss"].clock
    assert clock is not None and clock[1][0] == 0 and clock[1][-1] == pytest.approx(walls.max() - walls.min())


async def test_t_puts_time_on_the_x_axis_of_a_run_drawn_from_its_envelopes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _record(run_dir, 300, 10)
    app = TuidiagApp(run_dir)
    async with app.run_test(size=(110, 32)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        screen = app.screen
        assert app.model._slots[run_dir].envelopes is not None  # drawn from envelopes, not from rows
        await pilot.press("t")
        await pilot.pause()
        assert screen.time_axis
        rows = screen.query_one("#chart-loss", MetricChart).render().plain.split("\n")
        assert rows[-2].split()[0] == "time", rows[-2]
        assert not [n for n in app._notifications if "no wall times" in n.message]
