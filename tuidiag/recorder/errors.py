"""Catching, counting and reporting the recorder's own errors, once each.

Nothing raised inside the recorder may reach the training loop. Each distinct
failure (by place and exception type) is printed once on stderr and written once
as a ``recorder_error`` event; all of them are counted.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import traceback
from typing import Any, Callable, TypeVar

from tuidiag.format import EVENT_RECORDER_ERROR

F = TypeVar("F", bound=Callable[..., Any])


class ErrorReporter:
    """Counts errors and reports each kind once, to stderr and to an event sink."""

    def __init__(self) -> None:
        self.count = 0
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.sink: Callable[[str, str, dict[str, Any]], None] | None = None

    def report(self, where: str, exc: BaseException) -> None:
        """Record an error; print and emit an event the first time this kind occurs."""
        key = (where, type(exc).__name__)
        with self._lock:
            self.count += 1
            first = key not in self._seen
            self._seen.add(key)
        if not first:
            return
        message = f"tuidiag: recorder error in {where}: {type(exc).__name__}: {exc} (training continues; further errors of this kind are counted, not printed)"
        try:
            print(message, file=sys.stderr)
            if self.sink is not None:
                detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=6))
                self.sink(EVENT_RECORDER_ERROR, message, {"where": where, "traceback": detail, "time": time.time()})
        except Exception:  # reporting must not fail either
            pass


def guarded(fn: F) -> F:
    """Decorate a public recorder method so exceptions are reported and swallowed."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except Exception as exc:
            self.errors.report(fn.__name__, exc)
            return None

    return wrapper  # type: ignore[return-value]
