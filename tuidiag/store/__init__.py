"""The run store: the on-disk format's writing helpers and the incremental reader."""

from tuidiag.store.decode import Event
from tuidiag.store.discovery import find_runs
from tuidiag.store.reader import Run, Series, open_run

__all__ = ["Event", "Run", "Series", "find_runs", "open_run"]
