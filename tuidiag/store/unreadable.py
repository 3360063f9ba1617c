"""Why a run could not be read, as one line for the overview, ``tuidiag ls`` and the run's notice."""

from __future__ import annotations

MAX_REASON = 300
"""Characters of an exception's text kept as a run's reason for being unreadable."""


def reason_of(exc: BaseException) -> str:
    """An exception as one line: its type and message (an ``OSError``: its error and file)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return f"{type(exc).__name__}: {text}"[:MAX_REASON] if text else type(exc).__name__
