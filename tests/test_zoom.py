"""Zoom in the run view: ``z`` then left/right narrows the steps the charts show, drawn from finer levels; ``Z`` resets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app_helpers import wait_for
from tests.test_envelope_run import _long_run
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))


async def test_zoom_narrows_the_charts_and_keeps_the_spike(tmp_path: Path) -> None:
    _long_run(tmp_path / "run", 64_000, spike=47_000)
    app = TuidiagApp(tmp_path / "run")
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=30)
        screen = app.screen
        whole = screen.detail.charts["loss"].lines[0][1]
        await pilot.press("z", "right", "left", "right")  # the right half, its left half, its right half
        first, last = screen.detail.steps
        assert screen.window is not None and screen.window[1] - screen.window[0] <= (last - first) // 8 + 1
        lo, hi = screen.window

        def zoomed() -> bool:
            x = screen.detail.charts["loss"].lines[0][1]
            return bool(len(x)) and x.min() >= lo and x.max() <= hi

        assert await wait_for(pilot, zoomed, timeout=30)
        x, y = screen.detail.charts["loss"].lines[0][1:]
        assert lo <= 47_000 <= hi and y.max() == 9.0  # the spike, in the window, still drawn
        assert len(set(x.tolist())) > len(set(whole.tolist())) // 8  # finer steps than the whole run's view had there
        await pilot.press("Z")
        assert await wait_for(pilot, lambda: screen.window is None and screen.detail.charts["loss"].lines[0][1].max() > hi, timeout=30)
