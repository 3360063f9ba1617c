"""The help screen (``?``): every key, by screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
tuidiag monitor - keys

Everywhere
  ?          this help              ctrl+p   command palette
  q          quit                   r        re-read all runs now

Overview (table of runs)
  up/down    move                   enter    open the run
  space      select for compare     c        compare selected runs
  /          filter by name/status  esc      clear the filter
  s          cycle sort: name, status, step, loss, health

Run view
  1 2 3 4    loss, grad norm, LR, update ratio charts
  5          per-layer gradient norms (layers x time)
  d          diagnosis (narrow terminals)
  g          log/linear y axis      f        jump to the next finding's first step
  k          multi-rank runs: loss and grad norm of all ranks, their spread, one rank
  [ ]        previous/next event or finding   enter on an event: mark its step
  e          smoothing (EMA) of loss, grad norm, update: off, 0.6, 0.9, 0.99
  t          x axis: step or wall-clock time since the first step
  , .        chart cursor left/right (< > ten times as far): values at its step
  esc        hide the chart cursor, else back to the overview

Replay (tuidiag replay RUN)
  space      play/pause             left/right  step back/forward
  + -        faster/slower          home/end    start/end
  The diagnosis panel shows what was known at the cursor.

Jobs (run view, after asking: inside a live training, else from the run's factory)
  l LR finder   n NaN hunt   o overfit one batch   s sharpness   x cancel
  7          the Jobs tab: newest result of each job
  a          apply a fix to the live training: scale the LR, clip, checkpoint
"""


class HelpScreen(ModalScreen[None]):
    """A modal with the key reference; any of esc, q, ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(HELP)
