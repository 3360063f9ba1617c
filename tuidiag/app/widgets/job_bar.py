"""The run view's job progress bar: the job, a bar of steps done, elapsed time, time left, the cancel key."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar, Static

from tuidiag.viewmodel.job_progress import JobView


class JobBar(Horizontal):
    """One line under the charts while a job runs or a NaN hunt is armed; hidden otherwise."""

    DEFAULT_CSS = """
    JobBar { height: 1; display: none; background: $boost; }
    JobBar.active { display: block; }
    JobBar > #job-title { width: auto; padding: 0 1; text-style: bold; }
    JobBar > ProgressBar { width: 1fr; min-width: 8; max-width: 40; }
    JobBar > ProgressBar > Bar { width: 1fr; }
    JobBar Bar > .bar--bar, JobBar Bar > .bar--indeterminate { background: $foreground 30%; }
    JobBar > #job-figures { width: auto; padding: 0 1; }
    """

    def __init__(self, cancel_key: str, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cancel_key = cancel_key
        self.view: JobView | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="job-title")
        yield ProgressBar(total=None, show_percentage=False, show_eta=False, id="job-progress")
        yield Static(id="job-figures")

    def show(self, view: JobView | None) -> None:
        """Draw ``view`` (None: no job, the bar hides)."""
        self.view = view
        self.set_class(view is not None, "active")
        if view is None:
            return
        bar = self.query_one(ProgressBar)
        if view.determinate:
            bar.update(total=view.total, progress=min(view.done, view.total))
        elif bar.total is not None:
            bar.update(total=None)
        self.query_one("#job-title", Static).update(Text(view.title))
        self.query_one("#job-figures", Static).update(Text(view.figures(self.cancel_key)))
