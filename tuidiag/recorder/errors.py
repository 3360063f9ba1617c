"""Catching, counting and reporting the recorder's own errors, once each.

Nothing raised inside the recorder may reach the training loop. Each distinct
failure (by place and exception type) is printed once on stderr and written once
as a ``recorder_error`` event; all of them are counted. Values the recorder
refuses at the call (:class:`Rejections`) are counted and reported the same way,
once per name, as ``rejected_value`` events.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import traceback
from typing import Any, Callable, TypeVar

from tuidiag.format import EVENT_RECORDER_ERROR, EVENT_REJECTED

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


class Rejections:
    """Counts values refused at the call; reports the first refusal of each name, to stderr and as an event."""

    MAX_REPORTED = 1000
    """Names reported individually; refusals of further names are counted only (said once)."""

    def __init__(self) -> None:
        self.count = 0
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.sink: Callable[[str, str, dict[str, Any]], None] | None = None

    def reject(self, where: str, key: str, reason: str, values: int = 1) -> None:
        """Count ``values`` refused values of ``key``; report the first refusal of ``(where, key)``."""
        with self._lock:
            self.count += values
            seen = (where, key) in self._seen
            full = len(self._seen) >= self.MAX_REPORTED
            if not seen and not full:
                self._seen.add((where, key))
            last = not seen and full and ("", "") not in self._seen
            if last:
                self._seen.add(("", ""))
        if seen or (full and not last):
            return
        if last:
            message = f"tuidiag: {where}: values of more than {self.MAX_REPORTED} names were not recorded; further ones are counted, not reported"
        else:
            message = f"tuidiag: {where}: {key[:200]!r} not recorded: it {reason} (counted; further values of this name are not reported)"
        try:
            print(message, file=sys.stderr)
            if self.sink is not None:
                self.sink(EVENT_REJECTED, message, {"where": where, "key": key, "reason": reason})
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
