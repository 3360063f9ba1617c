"""SVG snapshots of the monitor at 80x24 and 160x48 (pytest-textual-snapshot).

Update after an intended change with ``pytest tests/test_snapshots.py --snapshot-update``
and look at the new SVGs before committing them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tuidiag
from tuidiag.viewmodel.snapshot import PENDING, STATUS_READING, STATUS_UNREADABLE
from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp


def _loaded(app: TuidiagApp, detail: bool = False):
    app.animation_level = "none"  # no tab-underline animation caught mid-way

    async def run_before(pilot) -> None:
        # every run read (none still "reading" under load), and the run view drawn from its detail
        assert await wait_for(pilot, lambda: bool(app.summaries) and all(s.status != STATUS_READING for s in app.summaries),
                              timeout=60)
        # and diagnosed: a run summarised from run.json shows the pending badge until its diagnosis lands
        assert await wait_for(pilot, lambda: all(s.health != PENDING.code or s.status == STATUS_UNREADABLE for s in app.summaries),
                              timeout=60)
        if detail:
            assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None
                                  and getattr(app.screen.detail.summary, "status", STATUS_READING) != STATUS_READING, timeout=60)
        await pilot.pause(0.5)
        await pilot.wait_for_scheduled_animations()

    return run_before


@pytest.fixture
def demo_root(monkeypatch) -> Path:
    monkeypatch.chdir(DEMO_RUNS.parent)
    return Path("demo_runs")


def test_overview_80x24(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root, clock=fixed_clock)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_loaded(app))


def test_run_view_80x24(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "lr-too-high", clock=fixed_clock)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_loaded(app, detail=True))


def test_overview_60x20(snap_compare, demo_root) -> None:
    """The review's narrow size: whole numbers or none (step 1,499 was shown as ``1,49``)."""
    app = TuidiagApp(demo_root, clock=fixed_clock)
    assert snap_compare(app, terminal_size=(60, 20), run_before=_loaded(app))


def test_run_view_60x20(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "healthy", clock=fixed_clock)
    assert snap_compare(app, terminal_size=(60, 20), run_before=_loaded(app, detail=True))


def test_run_view_layers_160x48(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "vanishing-gradients", clock=fixed_clock)

    async def run_before(pilot) -> None:
        from tuidiag.app.widgets.layers import LayerHeatmap

        await _loaded(app, detail=True)(pilot)
        await pilot.press("5")
        grid = app.screen.query_one(LayerHeatmap)  # drawn for its own width once its tab is shown (load may delay it)
        assert await wait_for(pilot, lambda: grid._drawn is not None and grid._drawn[1] == max(10, grid.size.width - 2),
                              timeout=60)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


def test_hostile_text_80x24(snap_compare, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    hostile = "[bold red]pwn[/] \x1b]0;title\x07\x1b[31mred \u6f22\u5b57 " + "x" * 60
    with tuidiag.Recorder(Path("runs") / "evil", name=hostile, config={"[i]": "\x1b[2J"}) as rec:
        rec.log({"[link=x]m[/link]": 1.0}, step=0)
        rec.event("note", "[blink]message[/blink] \x1b[5m")
    app = TuidiagApp(Path("runs"), clock=fixed_clock)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_loaded(app))


def _keys_after_load(app: TuidiagApp, *keys: str):
    """The run view loaded, then ``keys`` pressed (smoothing, cursor moves)."""
    loaded = _loaded(app, detail=True)

    async def run_before(pilot) -> None:
        await loaded(pilot)
        await pilot.press(*keys)
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()

    return run_before


CURSOR_KEYS = ("e", "e", "e", "e", "less_than_sign", "less_than_sign", "less_than_sign", "less_than_sign")
"""Smoothing cycled from 0.9 round to 0.9 (every strength drawn once), the cursor 40 columns back from the end."""


def test_run_view_smoothing_and_cursor_80x24(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "healthy", clock=fixed_clock)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_keys_after_load(app, *CURSOR_KEYS))


def test_run_view_smoothing_and_cursor_200x50(snap_compare, demo_root) -> None:
    app = TuidiagApp(demo_root / "healthy", clock=fixed_clock)
    assert snap_compare(app, terminal_size=(200, 50), run_before=_keys_after_load(app, *CURSOR_KEYS))


def test_run_view_no_color_80x24(snap_compare, demo_root, monkeypatch) -> None:
    """Under NO_COLOR train and validation differ by glyph (braille line, dots), and the legend says which."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = TuidiagApp(demo_root / "overfitting", clock=fixed_clock)
    assert app.no_color
    assert snap_compare(app, terminal_size=(80, 24), run_before=_keys_after_load(app, "less_than_sign", "less_than_sign"))
