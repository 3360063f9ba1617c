"""The Jobs tab: a result's sentences wrap to the pane at any width, so its conclusion is never cut off.

A real LR-finder result (saved by ``tuidiag lr-find`` on the lr-too-high demo, kept as the
screenshots' input) is shown at widths from 80 to 200 columns: every word of each sentence
must be in the lines the tab draws, and every chart line is drawn as it was rendered.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widgets import Static

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tests.conftest import full_only
from tuidiag.app.app import TuidiagApp
from tuidiag.store.job_results import read_result
from tuidiag.text.jobs import render
from tuidiag.viewmodel.jobs_view import is_chart_line

SAVED = Path(__file__).resolve().parent.parent / "docs" / "screenshot_inputs" / "lr-too-high" / "jobs"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("jobs") / "lr-too-high"
    shutil.copytree(DEMO_RUNS / "lr-too-high", run)
    shutil.copytree(SAVED, run / "jobs")
    return run


def _drawn(widget: Static) -> list[str]:
    """Every line the widget draws at its width (its whole height, scrolled or not)."""
    width, height = widget.size
    return ["".join(segment.text for segment in strip) for strip in widget.render_lines(Region(0, 0, width, height))]


async def test_every_word_and_chart_line_of_a_result_is_drawn(run_dir: Path) -> None:
    (saved,) = sorted(run_dir.glob("jobs/*.json"))
    rendered = render("lr_find", read_result(saved)["result"], False).splitlines()
    words = [w for line in rendered if not is_chart_line(line) for w in line.split()]
    charts = [line.rstrip() for line in rendered if is_chart_line(line)]
    assert any(len(line) > 80 for line in rendered if not is_chart_line(line))  # the case: sentences wider than 80
    app = TuidiagApp(run_dir, clock=fixed_clock)
    async with app.run_test(size=(80, 40)) as pilot:
        assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None, timeout=60)
        await pilot.press("7")
        for width in (80, 120, 200):
            await pilot.resize_terminal(width, 40)
            widget = app.screen.query_one("#jobs-text", Static)
            assert await wait_for(pilot, lambda: widget.size.width > 0 and widget.size.width <= width
                                  and any("lr find" in line for line in _drawn(widget)))
            drawn = _drawn(widget)
            assert all(len(line.rstrip()) <= widget.size.width for line in drawn)
            text = " ".join(line for line in drawn if not is_chart_line(line)).split()
            assert text[text.index("lr") + 2:][: len(words)] == words, f"{width}: a word is missing or cut"
            if widget.size.width >= max(len(c) for c in charts):  # a chart wider than the pane is cropped, not wrapped
                assert [line.rstrip() for line in drawn if is_chart_line(line)] == charts


@pytest.mark.parametrize("size", [(80, 24), pytest.param((200, 50), marks=full_only)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_keys_scroll_a_result_longer_than_the_pane_to_its_last_line(run_dir: Path, size: tuple[int, int]) -> None:
    """The pane takes the keys as soon as its tab is shown: the end key and the page keys bring the result's last
    line into view, and home brings back its first."""
    app = TuidiagApp(run_dir, clock=fixed_clock)
    async with app.run_test(size=(80, 12)) as pilot:  # a result taller than the pane
        assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None, timeout=60)
        await pilot.resize_terminal(*size)
        await pilot.resize_terminal(size[0], 12)
        await pilot.press("7")
        pane = app.screen.query_one("#jobs-tab")
        text = app.screen.query_one("#jobs-text", Static)
        assert await wait_for(pilot, lambda: pane.max_scroll_y > 0 and any("lr find" in line for line in _drawn(text)))
        assert app.focused is pane
        last = next(line for line in reversed(_drawn(text)) if line.strip())
        await pilot.press("end")
        assert await wait_for(pilot, lambda: pane.scroll_y == pane.max_scroll_y)
        await pilot.press("home")
        assert await wait_for(pilot, lambda: pane.scroll_y == 0)
        for _ in range(40):
            if pane.scroll_y == pane.max_scroll_y:
                break
            await pilot.press("pagedown")
            await pilot.pause()
        assert pane.scroll_y == pane.max_scroll_y
        region = pane.content_region
        shown = ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()[region.y:region.bottom]]
        assert any(last.strip()[:40] in line for line in shown), (last, shown)
