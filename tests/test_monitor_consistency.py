"""One definition per figure across the monitor: steps/s, replay's step keys.

- **steps/s**: the overview and the run view show the same number, the steps advanced per
  second of wall-clock time over the newest 30 s (pauses for evaluation included). The runs
  here pause every few steps, where the run view's old figure (1 / median step time) and
  the overview's differed.
- **Replay left/right** move one recorded step (one sample of the loss), whatever the play
  speed: on a run that logs every 10th step a press moves 10 steps, on one that logs every
  step it moves one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.app_helpers import fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.importers.run_writer import write_run
from tuidiag.importers.source import SourceRun, SourceSeries
from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.model import RunsModel
from tuidiag.viewmodel.replay_cursor import next_sample

PACES = [  # (seconds per step, a pause every N steps, pause seconds, log every K steps)
    (0.01, 100, 1.0, 1),
    (0.02, 25, 0.5, 1),
    (0.005, 50, 3.0, 10),
    (0.1, 10, 0.0, 1),
]


def _paced_run(root: Path, name: str, step_s: float, every: int, pause: float, log_every: int, steps: int = 400) -> Path:
    """A finished run whose wall times advance ``step_s`` per step, plus ``pause`` every ``every`` steps."""
    all_steps = np.arange(steps)
    walls = 1_000.0 + all_steps * step_s + (all_steps // every) * pause
    step_time = np.diff(walls, prepend=walls[0] - step_s)
    kept = all_steps % log_every == 0
    series = [SourceSeries(n, all_steps[kept], v[kept], walls[kept]) for n, v in
              (("loss", 1.0 / (1 + all_steps)), ("time/step", step_time))]
    return write_run(SourceRun(Path(name), series, {"kind": "test"}), root).path


@pytest.fixture(scope="module")
def paced_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("paced")
    for i, pace in enumerate(PACES):
        _paced_run(root, f"pace{i}", *pace)
    return root


def _expected_speed(step_s: float, every: int, pause: float, log_every: int, steps: int = 400) -> float:
    """Steps per wall-clock second over the newest 30 s, worked out from the pace (not from the run files)."""
    logged = np.arange(0, steps, log_every)
    walls = 1_000.0 + logged * step_s + (logged // every) * pause
    first = int(np.searchsorted(walls, walls[-1] - 30.0))
    first = min(first, len(logged) - 2)
    return float(logged[-1] - logged[first]) / float(walls[-1] - walls[first])


def test_overview_and_run_view_show_one_steps_per_second(paced_root: Path) -> None:
    model = RunsModel(paced_root)
    model.discover()
    summaries = {s.name: s for s in model.refresh()}
    for i, pace in enumerate(PACES):
        summary = summaries[f"pace{i}"]
        strip = dict(model.detail(summary.key).system)
        assert summary.steps_per_s == pytest.approx(_expected_speed(*pace))
        assert strip["steps/s"] == fmt(summary.steps_per_s), pace  # the run view's strip, the overview's cell


@given(st.lists(st.integers(-1000, 1000), unique=True).map(sorted), st.integers(-1100, 1100), st.sampled_from([-1, 1]))
def test_next_sample_moves_one_recorded_step(samples: list[int], at: int, direction: int) -> None:
    moved = next_sample(np.array(samples, dtype=np.int64), at, direction)
    if not samples:  # nothing recorded to go by: one step
        assert moved == next_sample(None, at, direction) == at + direction
        return
    ahead = [s for s in samples if (s > at if direction > 0 else s < at)]
    assert moved == ((min(ahead) if direction > 0 else max(ahead)) if ahead else at)


async def test_replay_keys_move_one_sample_at_any_speed(paced_root: Path) -> None:
    app = TuidiagApp(paced_root / "pace2", replay=True, clock=fixed_clock)  # logged every 10th step
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, 30)
        screen = app.screen
        await pilot.press("home")
        assert await wait_for(pilot, lambda: screen.detail.at == 0)
        for speed_keys in ((), ("plus", "plus", "plus")):  # x5, then x100
            await pilot.press(*speed_keys, "home", "right", "right", "right")
            assert screen.at == 30
            await pilot.press("left")
            assert screen.at == 20
        await pilot.press("end", "right")
        assert screen.at == 390  # the last sample: nowhere further to go
        assert await wait_for(pilot, lambda: screen.detail.at == 390)
