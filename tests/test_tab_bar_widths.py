"""The run view's tab bar shows which tab is active, for every tab, at narrow widths too.

Textual's tab bar scrolls the active tab into view (``Tabs._scroll_active_tab``) and draws it
bold with the underline's highlight under it; this keeps that true for the run view's tabs.

At 40 and 80 columns (and 60 with ``TUIDIAG_FULL_TESTS=1``) the eight tabs do not all fit: the bar scrolls. For every tab, reached by
its key from the tab before and from the farthest one (the bar scrolled to the other end), and after
a resize: the active tab is wholly on screen, its title is drawn in the bar's row unlike every other
tab shown, and the underline under it is highlighted there (no other tab's span).
"""

from __future__ import annotations

from textual.widgets import Tab, TabbedContent
from textual.widgets._tabs import Underline

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tests.conftest import FULL_TESTS
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.monitor_keys import RUN_TABS

WIDTHS = (40, 60, 80) if FULL_TESTS else (40, 80)
"""Widths at which the eight tabs do not all fit; the default run leaves out 60, between the two it keeps."""


def _row(app: TuidiagApp, y: int) -> str:
    strips = app.screen._compositor.render_strips()  # the screen as drawn
    return "".join(segment.text for segment in strips[y])


def _styles(strips: list, y: int, x0: int, x1: int) -> set[str]:
    """The styles of the non-blank cells ``x0..x1`` of row ``y`` of the screen as drawn (``strips``)."""
    found, x = set(), 0
    for segment in strips[y]:
        for char in segment.text:
            if x0 <= x < x1 and char.strip():
                found.add(str(segment.style))
            x += 1
    return found


def _active_shown(app: TuidiagApp, tab_id: str) -> bool:
    """Whether ``tab_id`` is the active tab, wholly inside the bar, drawn with its title, underlined under it."""
    charts = app.screen.query_one("#charts", TabbedContent)
    if charts.active != tab_id:
        return False
    bar = charts.query_one("#tabs-scroll")
    tab = next(t for t in charts.query(Tab) if t.id and t.id.endswith(tab_id))
    if not ("-active" in tab.classes and bar.region.contains_region(tab.region)):
        return False
    title = str(tab.label).strip()
    strips = app.screen._compositor.render_strips()  # the screen as drawn, once per check
    if title not in "".join(segment.text for segment in strips[tab.region.y])[tab.region.x: tab.region.right]:
        return False
    others = [t for t in charts.query(Tab) if t is not tab and bar.region.contains_region(t.region)]
    active = _styles(strips, tab.region.y, tab.region.x, tab.region.right)
    if any(_styles(strips, t.region.y, t.region.x, t.region.right) == active for t in others):  # the active tab's title is drawn unlike every other shown
        return False
    underline = charts.query_one(Underline)
    start, end = tab.virtual_region.shrink(tab.styles.gutter).column_span
    return underline.show_highlight and (underline.highlight_start, underline.highlight_end) == (start, end)


async def test_the_active_tab_is_shown_at_every_width() -> None:
    """One app, opened at the narrowest width and resized through the others; at each width every tab is
    reached from its neighbour (both ways) and from the far end, and a resize keeps the active tab shown."""
    app = TuidiagApp(DEMO_RUNS, clock=fixed_clock)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 5)
        app.open_run(str(DEMO_RUNS / "lr-too-high"))
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        assert await wait_for(pilot, lambda: _active_shown(app, RUN_TABS[0].id), timeout=5)  # as it opens
        order = list(RUN_TABS) + list(reversed(RUN_TABS))  # each from its neighbour, both ways
        order += [t for pair in zip(RUN_TABS, reversed(RUN_TABS)) for t in pair]  # each from the far end
        for width in WIDTHS:
            await pilot.resize_terminal(width, 24)  # a resize keeps the active tab shown
            assert await wait_for(pilot, lambda: app.size.width == width and _active_shown(app, order[-1].id), timeout=5), width
            for tab in order:
                await pilot.press(tab.key)
                assert await wait_for(pilot, lambda: _active_shown(app, tab.id), timeout=5), (width, tab.id, _row(app, 1))
