"""The run view's tabs, defined once: each tab's pane id, key, label and what it shows.

The tab bar, the tab keys (``RunScreen.BINDINGS``) and the help screen all read ``RUN_TABS``;
adding a tab is one entry here plus the widget its pane holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding
from textual.content import Content


@dataclass(frozen=True)
class RunTab:
    """One tab of the run view."""

    id: str
    """The pane's id; for a chart tab also the key of its chart in ``RunDetail.charts``."""
    key: str
    """The key that shows the tab."""
    label: str
    """The tab bar's label: short, so that every tab fits at 80 columns."""
    shows: str
    """What the tab shows, for the help screen."""
    chart: bool = False
    """Whether the pane is a ``MetricChart`` of ``RunDetail.charts[id]``."""
    smoothed: bool = False
    """Whether the smoothing key (``e``) smooths its chart (not the LR's: smoothing a schedule only makes it lag)."""


RUN_TABS: tuple[RunTab, ...] = (
    RunTab("loss", "1", "Loss", "training and validation loss", chart=True, smoothed=True),
    RunTab("grad", "2", "Grad norm", "global gradient norm before clipping, the clip threshold", chart=True, smoothed=True),
    RunTab("lr", "3", "LR", "learning rate of each parameter group", chart=True),
    RunTab("update", "4", "Update", "update/weight ratio (healthy near 1e-3)", chart=True, smoothed=True),
    RunTab("layers", "5", "Layers", "per-layer gradient norms (layers x time)"),
    RunTab("events-tab", "6", "Events", "non-finite values, clipping, recorder errors; enter shows one whole"),
    RunTab("jobs-tab", "7", "Jobs", "the newest result of each job"),
)
"""Every tab of the run view, in tab-bar order."""

CHART_TABS: tuple[RunTab, ...] = tuple(tab for tab in RUN_TABS if tab.chart)
"""The tabs that hold a metric chart."""


def tab_of(tab_id: str) -> RunTab:
    """The registered tab with pane id ``tab_id``."""
    return next(tab for tab in RUN_TABS if tab.id == tab_id)


def tab_title(tab: RunTab) -> Content:
    """The tab bar's title of ``tab``: its key in bold, then its label."""
    return Content.assemble((tab.key, "bold"), f" {tab.label}")


def tab_bindings() -> list[Binding]:
    """One binding per tab: its key shows it (not in the footer; help lists them)."""
    return [Binding(tab.key, f"tab('{tab.id}')", tab.label, show=False, tooltip=tab.shows) for tab in RUN_TABS]
