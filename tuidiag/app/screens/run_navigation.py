"""Moving through a run in its view: the replay cursor and its speed, jumps to events and findings, the zoom.

A mixin of :class:`tuidiag.app.screens.run_screen.RunScreen`. A replay moves its cursor
and asks the app for the view as of that step (``CursorMoved``); a live run marks the
step instead. The zoom narrows the steps the charts show to a half at a time
(``ZoomChanged``); the app reads that range.
"""

from __future__ import annotations

from typing import Callable

from rich.text import Text

from tuidiag.viewmodel.replay_cursor import next_sample
from tuidiag.viewmodel.snapshot import RunDetail

SPEEDS = (1, 2, 5, 10, 25, 100)
"""Replay speeds: steps of the run per tick, in 1/400 of the run."""


class RunNavigation:
    """The run view's cursor, jumps and zoom (the screen's state is its own: see ``RunScreen.__init__``)."""

    key: str
    replay: bool
    at: int | None
    detail: RunDetail | None
    speed_index: int
    playing: bool
    marker: int | None
    _finding_index: int
    window: tuple[int, int] | None
    zooming: bool
    _update: Callable[..., None]
    """Sets a one-line ``Static``'s text when it changed (``RunScreen._update``; ``layout=False``: its size stays)."""

    def _marker(self) -> int | None:
        return self.at if self.replay and self.at is not None else self.marker

    def _cursor_bar(self) -> None:
        if not self.replay or self.detail is None:
            return
        first, last = self.detail.steps
        at = self.at if self.at is not None else last
        width = max(10, self.size.width - 40)
        filled = int(width * (at - first) / max(1, last - first))
        bar = Text(f" {'playing' if self.playing else 'paused '} x{SPEEDS[self.speed_index]}  ", style="bold")
        bar.append("=" * filled, style="magenta")
        bar.append("-" * (width - filled), style="dim")
        bar.append(f"  {at}/{last}")
        self._update("#cursor-bar", bar, layout=False)

    def _move(self, at: int | None) -> None:
        if self.detail is not None and at is not None:
            first, last = self.detail.steps
            at = max(first, min(last, at))
        self.at = at
        self._cursor_bar()
        self.post_message(self.CursorMoved(self.key, at))

    def _tick(self) -> None:
        if self.playing and self.detail is not None:
            first, last = self.detail.steps
            at = (self.at if self.at is not None else first) + max(1, (last - first) * SPEEDS[self.speed_index] // 400)
            if at >= last:
                self.playing = False
            self._move(min(at, last))

    def action_play(self) -> None:
        if not self.replay:
            self.notify("replay a finished run with: tuidiag replay RUN")
            return
        self.playing = not self.playing
        if self.playing and self.detail is not None and (self.at or 0) >= self.detail.steps[1]:
            self.at = self.detail.steps[0]
        self._cursor_bar()

    def action_zoom(self) -> None:
        """Enter zoom: left/right then keep the left or right half of the steps shown; ``z`` again leaves it."""
        self.zooming = not self.zooming
        if self.zooming:
            self.notify("zoom: left/right keep the left/right half of the steps shown, z to stop, Z to show all")

    def action_zoom_reset(self) -> None:
        """Show every step again."""
        self.zooming = False
        if self.window is not None:
            self.window = None
            self.post_message(self.ZoomChanged(self.key, None))

    def _narrow(self, direction: int) -> None:
        if self.detail is None:
            return
        lo, hi = self.window or self.detail.steps
        if hi - lo < 2:
            self.notify("zoomed in to single steps")
            return
        middle = (lo + hi) // 2
        self.window = (lo, middle) if direction < 0 else (middle, hi)
        self.notify(f"steps {self.window[0]:,} to {self.window[1]:,}")
        self.post_message(self.ZoomChanged(self.key, self.window))

    def action_step(self, direction: int) -> None:
        """Replay: move to the next (or previous) step with a recorded loss, whatever the play speed."""
        if self.zooming:
            self._narrow(direction)
            return
        if self.detail is None or not self.replay:
            return
        self._move(next_sample(self.detail.samples, self.at if self.at is not None else self.detail.steps[1], direction))

    def action_speed(self, change: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + change))
        self._cursor_bar()

    def action_goto(self, where: str) -> None:
        if self.detail is not None:
            self._move(self.detail.steps[0] if where == "start" else None if not self.replay else self.detail.steps[1])

    def action_jump(self, direction: int) -> None:
        """Move to the next/previous step where an event or a finding starts."""
        if self.detail is None:
            return
        marks = self.detail.marks
        here = self._marker() if self._marker() is not None else (self.detail.steps[0] - 1 if direction > 0 else self.detail.steps[1] + 1)
        candidates = [m for m in marks if (m > here if direction > 0 else m < here)]
        if not candidates:
            self.notify("no more events or findings that way")
            return
        self._jump_to(candidates[0] if direction > 0 else candidates[-1])

    def action_next_finding(self) -> None:
        if self.detail is None or not self.detail.first_steps:
            self.notify("no finding with a first step yet")
            return
        items = sorted(self.detail.first_steps.items(), key=lambda kv: kv[1])
        self._finding_index = (self._finding_index + 1) % len(items)
        code, step = items[self._finding_index]
        self.notify(f"{code} first held at step {step}")
        self._jump_to(step)

    def _jump_to(self, step: int) -> None:
        if self.replay:
            self._move(step)
        else:
            self.marker = step
            if self.detail is not None:
                self.show(self.detail)
