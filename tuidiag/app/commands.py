"""Command palette entries: open any run by name, replay it, or show the help."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import Hit, Hits, Provider

from tuidiag.text.safe import clean

if TYPE_CHECKING:
    from tuidiag.app.app import TuidiagApp


class RunCommands(Provider):
    """'open <run>' for every run the monitor knows."""

    async def search(self, query: str) -> Hits:
        """The runs whose 'open' command matches ``query``, best match first (Textual's command palette)."""
        app: TuidiagApp = self.app  # type: ignore[assignment]
        matcher = self.matcher(query)
        for summary in app.summaries:
            label = f"open {clean(summary.name, 60)} ({summary.status}, {summary.health})"
            score = matcher.match(label)
            if score > 0:
                yield Hit(score, matcher.highlight(label), partial(app.open_run, summary.key), help="show this run's charts and diagnosis")
