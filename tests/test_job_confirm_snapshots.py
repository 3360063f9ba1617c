"""SVG snapshots of the live NaN-hunt confirmation at 80x24 and 60x20: its whole text, wrapped, no sentence cut.

The regression: the live job's description was cut at 200 characters ("stops w…"), mid-sentence.
"""

from __future__ import annotations

import pytest

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.job_runner import live_command, live_where, shown
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.viewmodel.snapshot import STATUS_READING

MANIFEST = {"control": {"pid": 4242, "host": "trainbox-01", "device": "cuda:0"}}
"""A live run's control block, fixed so the picture is the same on every machine."""


def _confirm(app: TuidiagApp):
    app.animation_level = "none"

    async def run_before(pilot) -> None:
        assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None
                              and app.screen.detail.summary.status != STATUS_READING, timeout=60)
        live = live_where(MANIFEST, "nan_hunt", 401.0)
        app.push_screen(JobConfirmScreen("nan_hunt", shown(live_command("nan_hunt", "demo_runs/lr-too-high")), "", "", live))
        await pilot.pause(0.3)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (60, 20)], ids=["80x24", "60x20"])
def test_live_nan_hunt_confirmation(snap_compare, monkeypatch, size: tuple[int, int]) -> None:
    monkeypatch.chdir(DEMO_RUNS.parent)
    from pathlib import Path

    app = TuidiagApp(Path("demo_runs/lr-too-high"), clock=fixed_clock)
    assert snap_compare(app, terminal_size=size, run_before=_confirm(app))


@pytest.mark.parametrize("size", [(30, 10), (40, 12), (60, 14), (80, 24), (200, 50)])
@pytest.mark.parametrize("live", [True, False], ids=["live", "factory"])
async def test_the_keys_of_a_confirmation_are_on_screen_at_every_size(monkeypatch, size: tuple[int, int], live: bool) -> None:
    """At 30x10 the answer keys were cut off the bottom (a review): the text now scrolls, the keys stay docked."""
    monkeypatch.chdir(DEMO_RUNS.parent)
    from pathlib import Path

    app = TuidiagApp(Path("demo_runs/lr-too-high"), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None, timeout=60)
        where = live_where(MANIFEST, "nan_hunt", 401.0) if live else None
        app.push_screen(JobConfirmScreen("nan_hunt", shown(live_command("nan_hunt", "demo_runs/lr-too-high")),
                                         "train:build", "cpu", where))
        assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))
        await pilot.pause()
        drawn = "\n".join("".join(s.text for s in strip) for strip in app.screen._compositor.render_strips())
        assert "[y] run it" in drawn and "[esc]" in drawn, drawn
