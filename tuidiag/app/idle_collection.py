"""Cyclic garbage collection while the monitor is idle, not inside the frame a key asked for.

CPython collects its oldest generation once enough objects have outlived the younger ones, on whichever
allocation crosses the line. A full collection walks every object the collector tracks: about 115,000 in a run
view, 23-40 ms on a 2-core VM. In ``benchmarks/screen_cost.py`` one fell inside a tab switch about one time in
six and took the switch past 50 ms.

While the app runs, :class:`IdleCollection`:

- stops collecting the oldest generation on allocation (its threshold set out of reach; the two young
  generations are collected as before, in well under a millisecond);
- looks every :data:`COLLECT_EVERY` seconds whether CPython would have run a full collection by now (as many young
  collections since the last one as its threshold asks for) and, once no key or mouse event came for
  :data:`QUIET_FOR` seconds, runs it: cyclic garbage still goes within seconds, and never more often than before.

The collector's settings are process-wide: the first app to start saves them, the last one to stop puts them
back. Nothing is frozen (``gc.freeze``): the collections run while the user is idle, so their length matters less
than leaving a process's heap as it was (frozen garbage is never collected; counting the frozen walks them all).
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from textual import events

COLLECT_EVERY = 5.0
"""Seconds between the app's own full collections (each one waits for a quiet moment)."""
QUIET_FOR = 1.0
"""Seconds without a key or mouse event before a full collection may run."""
OUT_OF_REACH = 1 << 30
"""The oldest generation's threshold while an app runs: young collections to wait for before a full one."""

_lock = threading.Lock()
_users = 0
_saved: tuple[int, int, int] | None = None


def hold() -> None:
    """Take full collections off allocation (the first holder saves the thresholds)."""
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            young, middle, _ = _saved
            gc.set_threshold(young, middle, OUT_OF_REACH)
        _users += 1


def release() -> None:
    """Undo :func:`hold` once its last holder releases: the saved thresholds back."""
    global _users, _saved
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            _saved = None


def full_collection_after() -> int:
    """Young collections after which CPython collects the oldest generation: its threshold from before the first
    hold (the one in force when none is held)."""
    with _lock:
        return (_saved or gc.get_threshold())[2]


class IdleCollection:
    """One app's share of the policy: :meth:`start` on mount, :meth:`stop` on unmount, :meth:`input_seen` on each key
    or mouse event, :meth:`tick` every :attr:`every` seconds (``now``: the clock, for tests)."""

    def __init__(self, every: float = COLLECT_EVERY, quiet: float = QUIET_FOR,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.quiet = quiet
        self._now = now
        self.last_input = -math.inf
        """When the last key or mouse event came (``now()``)."""
        self._held = False

    def start(self) -> None:
        """Hold the policy for this app (once)."""
        if not self._held:
            self._held = True
            hold()

    def stop(self) -> None:
        """Release it (once)."""
        if self._held:
            self._held = False
            release()

    def input_seen(self) -> None:
        """A key or mouse event came: no full collection for :attr:`quiet` seconds."""
        self.last_input = self._now()

    def tick(self) -> bool:
        """Run the full collection CPython would have run by now, if no input came for :attr:`quiet` seconds (nothing
        while collection is disabled); whether it ran."""
        if not self._held or not gc.isenabled() or self._now() - self.last_input < self.quiet:
            return False
        if gc.get_count()[2] < full_collection_after():
            return False
        gc.collect()
        return True


class IdleCollecting:
    """The app's part (a mixin of :class:`tuidiag.app.app.TuidiagApp`): the policy held while it is mounted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.idle_collection = IdleCollection()
        """This app's share of the policy."""
        super().__init__(*args, **kwargs)

    def on_mount(self) -> None:
        self.idle_collection.start()
        self.set_interval(self.idle_collection.every, self.idle_collection.tick)  # type: ignore[attr-defined]

    def on_unmount(self) -> None:
        self.idle_collection.stop()

    async def on_event(self, event: events.Event) -> None:
        """Note input (then Textual handles the event as it would)."""
        if isinstance(event, (events.Key, events.MouseEvent)):
            self.idle_collection.input_seen()
        parent: Any = super()
        await parent.on_event(event)
