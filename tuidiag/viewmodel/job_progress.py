"""A job the monitor started, as the run view shows it: steps done of total, time elapsed, time left.

:class:`JobTracker` follows one job from the statuses its worker reports (a live
training's ``RUN/control`` status, or a job process's progress lines); its
:meth:`JobTracker.view` is a frozen :class:`JobView` for the progress bar, computed
from a clock reading, so that it is the same for the same inputs. No UI here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tuidiag import job_kinds

WAITING = "waiting"
"""Sent, not started yet: a live training takes it at its next step, a job process is starting."""
RUNNING = "running"
ARMED = "armed"
"""A NaN hunt waiting, in a live training, for a non-finite step."""


@dataclass(frozen=True)
class JobView:
    """What the progress bar shows of one job."""

    key: str
    job: str
    title: str
    state: str
    done: int
    total: int
    elapsed: float
    left: float | None
    """Estimated seconds left (None: not known yet)."""
    message: str = ""

    @property
    def determinate(self) -> bool:
        """True when the bar can show a fraction (done of a known total)."""
        return self.state in (RUNNING, ARMED) and self.total > 0

    def figures(self, cancel_key: str) -> str:
        """The text beside the bar, short enough for 80 columns: ``40/100  12 s elapsed  ~18 s left  x cancels``,
        ``armed: 150 steps left  6 s elapsed  ~15 s left  x cancels``."""
        cancel = f"{cancel_key} cancels"
        elapsed = f"{duration(self.elapsed)} elapsed"
        left = f"  ~{duration(self.left)} left" if self.left is not None else ""
        if self.state == ARMED:
            return f"armed: {max(0, self.total - self.done)} steps left  {elapsed}{left}  {cancel}"
        if self.state == RUNNING and self.total > 0:
            return f"{self.done}/{self.total}  {elapsed}{left}  {cancel}"
        if self.state == RUNNING:
            return f"running  {elapsed}  {cancel}"
        return f"{self.message or 'waiting to start'}  {elapsed}  {cancel}"


def duration(seconds: float | None) -> str:
    """``12 s``, ``3 min 05 s``, ``1 h 02 min`` (``-`` when unknown)."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    whole = int(round(max(0.0, seconds)))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class JobTracker:
    """One job the monitor started: when, and what its last status said."""

    def __init__(self, key: str, job: str, started: float, live: bool) -> None:
        self.key, self.job, self.started, self.live = key, job, started, live
        self.state = WAITING
        self.done = 0
        self.total = 0
        self.message = "waiting for the next step" if live else "starting the job process"
        self.running_since: float | None = None
        """When it was first seen running, with ``first_done`` units done then: its pace is measured from there."""
        self.first_done = 0
        self.request_id: str | None = None

    def update(self, status: dict[str, Any], now: float) -> None:
        """Take a status (``state``, ``done``, ``total``, ``message``) read at ``now``."""
        state = str(status.get("state") or "")
        done, total = _count(status.get("done")), _count(status.get("total"))
        if state in (RUNNING, ARMED):
            if self.state != state or done < self.done:  # it started, or started over: measure its pace from here
                self.running_since, self.first_done = now, done
            self.state = state
        elif state == "accepted":
            self.message = "accepted: runs at the next step"
        self.done, self.total = done, total

    def view(self, now: float, steps_per_s: float | None = None) -> JobView:
        """The progress bar's content at ``now``; an armed hunt's time left is at the run's ``steps_per_s``."""
        kind = job_kinds.find(self.job)
        title = kind.label if kind is not None else self.job
        return JobView(self.key, self.job, title, self.state, self.done, self.total, now - self.started,
                       self._left(now, steps_per_s), self.message)

    def _left(self, now: float, steps_per_s: float | None) -> float | None:
        remaining = self.total - self.done
        if remaining <= 0 or self.total <= 0:
            return 0.0 if self.total > 0 and self.state in (RUNNING, ARMED) else None
        if self.state == ARMED:
            return remaining / steps_per_s if steps_per_s else None
        if self.state != RUNNING or self.running_since is None or self.done <= self.first_done:
            return None
        pace = (now - self.running_since) / (self.done - self.first_done)
        return pace * remaining


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else 0


def outcome(job: str, state: str, message: str, result: dict[str, Any] | None) -> tuple[str, str]:
    """``(severity, text)`` of the notification when a job ends: its verdict when it finished, else why not."""
    kind = job_kinds.find(job)
    title = kind.title if kind is not None else job
    if state == "done" and result is not None:
        verdict = kind.verdict(result) if kind is not None else job_kinds.Verdict("finished")
        return ("warning" if verdict.negative else "information",
                f"{title} finished: {verdict.text}; the Jobs tab (7) shows it")
    if state == "done":
        return "information", f"{title} finished: the Jobs tab (7) shows it"
    if state == "cancelled":
        return "warning", f"{title} cancelled"
    return "error", f"{title} {'failed' if state == 'failed' else state}: {message}"
