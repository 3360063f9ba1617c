"""Reading runs on worker threads, each run on its own: a slow read never holds up the others.

:meth:`ReadPool.submit` queues one run's read for a few worker threads. A Python
thread cannot be stopped, so a read that outlasts :data:`SLOW_AFTER` seconds (a
huge run opened late, a hung network disk, a file crafted to be slow) is left to
finish on its thread and no longer counts against the pool: while every worker is
held by such a read, queued reads get a fresh worker. :meth:`ReadPool.wait` returns
when its time budget is spent, whatever is still running. No Textual here.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Callable

WORKERS = 4
"""Reads run at once (reading Parquet releases the GIL; diagnosing does not)."""
SLOW_AFTER = 1.0
"""Seconds after which a running read no longer holds one of the pool's places."""
IDLE_EXIT = 30.0
"""Seconds an idle worker waits for work before its thread ends."""


class ReadTask:
    """One queued or running read."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn
        self.started: float | None = None
        """``time.monotonic()`` when a worker took it up."""
        self.finished = threading.Event()

    def done(self) -> bool:
        """True once the read returned (or raised)."""
        return self.finished.is_set()

    def running_for(self, now: float) -> float:
        """Seconds it has been running (0 while queued)."""
        return 0.0 if self.started is None else now - self.started


class ReadPool:
    """A few worker threads, topped up while slow reads hold them."""

    def __init__(self, workers: int = WORKERS, top_up: bool = True, name: str = "tuidiag-read") -> None:
        self.workers = workers
        self.name = name
        """The worker threads' name (what a profiler or ``/proc`` shows)."""
        self.top_up = top_up
        """False: never more than ``workers`` threads, however long a task runs (work that only waits its turn)."""
        self._queue: deque[ReadTask] = deque()
        self._running: set[ReadTask] = set()
        self._cond = threading.Condition()
        self._threads = 0
        self._idle = 0
        self._starting = 0
        """Workers started and not yet waiting or working."""
        self._recheck: threading.Timer | None = None
        """Set while reads wait behind slow ones: tops the pool up once they count as slow."""

    def submit(self, fn: Callable[[], None]) -> ReadTask:
        """Queue ``fn`` (which must not raise; anything it raises is dropped) and return its task."""
        task = ReadTask(fn)
        with self._cond:
            self._queue.append(task)
            self._top_up()
            self._cond.notify()
        return task

    def wait(self, tasks: list[ReadTask], timeout: float = math.inf) -> bool:
        """Wait up to ``timeout`` seconds for ``tasks``; True when all are done."""
        deadline = time.monotonic() + timeout
        for task in tasks:
            while not task.finished.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
                with self._cond:
                    self._top_up()
                if time.monotonic() >= deadline:
                    return all(t.done() for t in tasks)
        return True

    def _top_up(self) -> None:
        """Start workers for the reads that wait, while fewer than ``workers`` are busy with reads that are
        not slow (lock held); when reads still wait, look again once the oldest running one turns slow."""
        now = time.monotonic()
        slow = sum(1 for task in self._running if task.running_for(now) > SLOW_AFTER) if self.top_up else 0
        waiting = len(self._queue) - self._idle - self._starting
        while waiting > 0 and self._threads - slow < self.workers:
            self._threads += 1
            self._starting += 1
            waiting -= 1
            threading.Thread(target=self._work, name=self.name, daemon=True).start()
        if waiting > 0 and self._recheck is None and self.top_up:
            soonest = min((SLOW_AFTER - task.running_for(now) for task in self._running
                           if task.running_for(now) <= SLOW_AFTER), default=SLOW_AFTER)
            self._recheck = threading.Timer(max(0.01, soonest + 0.01), self._timer_top_up)
            self._recheck.daemon = True
            self._recheck.start()

    def _timer_top_up(self) -> None:
        with self._cond:
            self._recheck = None
            self._top_up()

    def _work(self) -> None:
        with self._cond:
            self._starting -= 1
        while True:
            with self._cond:
                while not self._queue:
                    self._idle += 1
                    woke = self._cond.wait(IDLE_EXIT)
                    self._idle -= 1
                    if not woke and not self._queue:
                        self._threads -= 1
                        return
                task = self._queue.popleft()
                task.started = time.monotonic()
                self._running.add(task)
            try:
                task.fn()
            except BaseException:  # a read must never end its worker; the caller records its own errors
                pass
            finally:
                with self._cond:
                    self._running.discard(task)
                task.finished.set()
