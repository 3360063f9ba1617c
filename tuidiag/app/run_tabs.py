"""The run view's tabs and keys as Textual sees them: titles and bindings from :mod:`tuidiag.monitor_keys`.

The tabs themselves are data in :data:`tuidiag.monitor_keys.RUN_TABS` (with every other key the run
view binds); the tab bar, the tab keys (``RunScreen.BINDINGS``) and the help screen all read them
through here; adding a tab is one entry there plus the widget its pane holds.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.content import Content
from textual.widgets import TabPane

from tuidiag.monitor_keys import RUN_TABS, Key, RunTab

CHART_TABS: tuple[RunTab, ...] = tuple(tab for tab in RUN_TABS if tab.chart)
"""The tabs that hold a metric chart."""
CHART_IDS: frozenset[str] = frozenset(tab.id for tab in CHART_TABS)
"""The ids of :data:`CHART_TABS`."""
SCROLLING_TABS: frozenset[str] = frozenset({"jobs-tab"})
"""The tabs whose pane scrolls what it holds (:class:`ScrollingPane`): text that may be longer than the pane."""


class ScrollingPane(TabPane, ScrollableContainer, can_focus=True):
    """A tab pane that scrolls its content, focusable so that the arrow and page keys scroll it. The pane itself
    scrolls, not a container inside it: a widget mounted into a pane that is already running is laid out in the next
    frame, while one inside a container mounted with it joined the layout two frames later (a blank pane till then)."""


def tab_of(tab_id: str) -> RunTab:
    """The registered tab with pane id ``tab_id``."""
    return next(tab for tab in RUN_TABS if tab.id == tab_id)


def tab_title(tab: RunTab) -> Content:
    """The tab bar's title of ``tab``: its key in bold, then its label."""
    return Content.assemble((tab.key, "bold"), f" {tab.label}")


def tab_bindings() -> list[Binding]:
    """One binding per tab: its key shows it (not in the footer; help lists them)."""
    return [Binding(tab.key, f"tab('{tab.id}')", tab.label, show=False, tooltip=tab.shows) for tab in RUN_TABS]


def bindings(keys: tuple[Key, ...]) -> list[Binding]:
    """Textual bindings of ``keys`` (:data:`tuidiag.monitor_keys.APP_KEYS`, :data:`~tuidiag.monitor_keys.RUN_VIEW_KEYS`)."""
    return [Binding(k.keys, k.action, k.description, show=k.show, key_display=k.key_display, priority=k.priority,
                    tooltip=k.tooltip) for k in keys]
