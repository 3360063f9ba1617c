"""A tab's first visit paints its pane whole in the first frame that shows it.

The panes other than the first are composed when first shown (``tests/test_lazy_panes.py``); their widgets get
a size only once laid out. A widget that drew itself when given its data, before that, drew for a guessed size,
and the frame that showed the tab showed that drawing until the next one (the layers tab: a heatmap 10 cells
wide, its legend one entry a line). Each tab, at a small and a wide size: every frame painted from the key
until the screen has nothing left to paint is the frame the screen settles on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.screen import Screen

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tests.conftest import full_only
from tuidiag.app.app import TuidiagApp
from tuidiag.app.run_tabs import RUN_TABS
from tuidiag.app.screens.run_screen import RunScreen

Frame = tuple[tuple[str, object], ...]


def _painted(screen: Screen) -> Frame:
    """Every cell of the tabs' area (the tab bar and the pane shown) that the screen's compositor holds, as a user
    sees it: its character and its style (without the metadata Textual keeps for the mouse, which no one sees).
    The diagnosis beside it is left out: it may change while a key is handled (a diagnosis that lands late)."""
    area = screen.query_one("#charts").region
    cells: list[tuple[str, object]] = []
    for strip in screen._compositor.render_strips()[area.y:area.bottom]:
        for segment in strip.crop(area.x, area.right):
            style = segment.style.clear_meta_and_links() if segment.style is not None else None
            cells.extend((char, style) for char in segment.text)
    return tuple(cells)


def _nothing_to_paint(screen: Screen) -> bool:
    """No layout, scroll or repaint is waiting (what Textual's screen checks before it goes idle)."""
    return not (screen._layout_required or screen._scroll_required or screen._repaint_required
                or screen._recompose_required or screen._dirty_widgets)


SAVED_JOBS = Path(__file__).resolve().parent.parent / "docs" / "screenshot_inputs" / "lr-too-high" / "jobs"


@pytest.mark.parametrize(("run", "size"), [
    ("vanishing-gradients", (160, 48)), ("lr-too-high with a job result", (80, 24)),
    pytest.param("vanishing-gradients", (80, 24), marks=full_only),
    pytest.param("lr-too-high with a job result", (160, 48), marks=full_only)], ids=str)
async def test_each_tab_shows_whole_in_the_first_frame_of_its_first_visit(run: str, size: tuple[int, int], tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Two demo runs: one whose layers tab shows a vanished layer; one with an LR finder's result in its Jobs tab."""
    path = DEMO_RUNS / run.split()[0]
    if "job" in run:
        path = tmp_path / "run"
        shutil.copytree(DEMO_RUNS / "lr-too-high", path)
        shutil.copytree(SAVED_JOBS, path / "jobs")
    frames: list[Frame] = []
    refresh = Screen._compositor_refresh

    def recorded(screen: Screen) -> None:
        refresh(screen)
        if isinstance(screen, RunScreen):
            frames.append(_painted(screen))

    monkeypatch.setattr(Screen, "_compositor_refresh", recorded)
    app = TuidiagApp(path, clock=fixed_clock)
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                              and app.screen.detail.diagnosis.step is not None, timeout=60)
        screen = app.screen
        assert await wait_for(pilot, lambda: _nothing_to_paint(screen))
        for tab in [*RUN_TABS[1:], RUN_TABS[0]]:
            before = _painted(screen)
            frames.clear()
            await pilot.press(tab.key)
            assert await wait_for(pilot, lambda: bool(frames) and _nothing_to_paint(screen)), tab.id
            assert tab.id in screen.filled and screen.query_one("#charts").active == tab.id
            settled = _painted(screen)
            assert settled != before, tab.id
            shown = [i for i, frame in enumerate(frames) if frame != before]  # a frame painted before the key's
            assert shown and all(frames[i] == settled for i in range(shown[0], len(frames))), (
                f"tab {tab.id} at {size}: of {len(frames)} frames, "
                f"{[i for i in range(shown[0], len(frames)) if frames[i] != settled]} show neither the screen before "
                "the key nor the one it settles on")
