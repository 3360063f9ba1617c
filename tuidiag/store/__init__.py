"""The run store: the on-disk format's writing helpers and the incremental reader.

The names below load on first use (PEP 562): modules of the store that need no
pyarrow (``run.json``, shard names, the tail summary) import without it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["Event", "Run", "Series", "find_runs", "open_run"]

_EXPORTS = {"Event": "tuidiag.store.decode", "find_runs": "tuidiag.store.discovery", "Run": "tuidiag.store.reader",
            "Series": "tuidiag.store.reader", "open_run": "tuidiag.store.reader"}

if TYPE_CHECKING:
    from tuidiag.store.decode import Event
    from tuidiag.store.discovery import find_runs
    from tuidiag.store.reader import Run, Series, open_run


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tuidiag.store' has no attribute {name!r}")
