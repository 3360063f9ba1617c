"""The footer's right-docked ``^p palette`` key ends at the screen's edge: no cut key shows after it.

The regression: Textual's compact footer gave the palette key a right margin, so its last column
showed what the keys under it overflowed to (``^p palette]`` at 40x15, ``^p palettep`` at 60x20).
"""

from __future__ import annotations

from textual.widgets import Footer

from tests.app_helpers import DEMO_RUNS, fixed_clock, run_keys, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen

SIZES = [(40, 15), (60, 20), (80, 24), (100, 30)]


async def _footer_ends_at_the_edge(pilot, app: TuidiagApp) -> None:
    for width, height in SIZES:
        await pilot.resize_terminal(width, height)
        await pilot.pause()
        footer = app.screen.query_one(Footer).region
        strips = app.screen._compositor.render_strips()  # the screen as drawn, every widget composed
        line = "".join(segment.text for segment in strips[footer.y]).rstrip("\n")
        assert line.endswith("palette"), (width, line)


async def test_footer_ends_with_the_palette_key_at_every_width() -> None:
    app = TuidiagApp(DEMO_RUNS, clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_for(pilot, lambda: len(run_keys(app)) == 5)
        await _footer_ends_at_the_edge(pilot, app)  # the overview
        await pilot.resize_terminal(120, 30)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await _footer_ends_at_the_edge(pilot, app)  # the run view: more keys than fit
