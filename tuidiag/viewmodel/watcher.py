"""Noticing new data under a runs root: a watchdog observer, with a polling fallback.

``RunWatcher`` calls ``on_change(run_dirs)`` from a background thread whenever files
of runs change. inotify does not see writes made on another host (NFS, Lustre), so
the app also polls; ``--poll`` forces polling alone.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from watchdog import events as wd_events
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from tuidiag.sources import owner_of

log = logging.getLogger(__name__)


IGNORED_EVENTS = frozenset({"opened", "closed_no_write"})
"""Event types that never trigger a refresh (see ``WRITE_EVENTS``), should an observer deliver them."""
MODIFIED = "modified"

WRITE_EVENTS = [
    cls
    for name in ("FileMovedEvent", "FileDeletedEvent", "FileClosedEvent", "FileModifiedEvent",
                 "DirCreatedEvent", "DirMovedEvent", "DirDeletedEvent")
    if (cls := getattr(wd_events, name, None)) is not None
]
"""The events worth a refresh: a file renamed into place (the recorder's atomic
writes), deleted, or closed after writing (a writer that writes in place, whose
file is complete only then); a directory created (a new run), renamed or deleted.

Left out on purpose: file creations (an empty file, complete only at its close or
rename), opens and read-only closes (every refresh opens run.json and
new shards, so each refresh set off the next one: the app refreshed in a loop with
nothing new) and directory modifications (one for each directory whose entries change).

File modifications are delivered but count only for the files of kinds whose writers
append in place (TensorBoard event files, W&B logs, CSV logs: their writes are never
closed or renamed); for tuidiag's own runs they are ignored (one per ``write()`` call of
every temporary file: ~10 events per flush of every run, all for the same change that
the rename reports once)."""


class _Handler(FileSystemEventHandler):
    def __init__(self, on_change: Callable[[set[Path]], None]) -> None:
        self.on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in IGNORED_EVENTS:
            return
        paths = [event.src_path, getattr(event, "dest_path", "") or ""]
        modified = event.event_type == MODIFIED
        dirs = {d for p in paths if p for d in [owner_of(Path(str(p)), modified)] if d is not None}
        if dirs:
            self.on_change(dirs)


class RunWatcher:
    """A watchdog observer on ``root``; ``start()`` returns False when it cannot watch."""

    def __init__(self, root: Path, on_change: Callable[[set[Path]], None]) -> None:
        self.root = root
        self.on_change = on_change
        self._observer: Observer | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self.error: str | None = None

    def start(self) -> bool:
        """Start watching; on failure remember why (the app then polls). It walks the tree: call it from a worker.
        A watcher stopped meanwhile (the app closed while it started) stops again at once."""
        try:
            observer = Observer()
            observer.schedule(_Handler(self.on_change), str(self.root), recursive=True, event_filter=WRITE_EVENTS)
            observer.daemon = True
            observer.start()
        except (OSError, RuntimeError) as exc:
            self.error = f"file watching unavailable ({exc}); polling instead"
            log.warning(self.error)
            return False
        with self._lock:
            stopped = self._stopped
            if not stopped:
                self._observer = observer
        if stopped:
            observer.stop()
            observer.join(timeout=2)
        return not stopped

    def stop(self) -> None:
        """Stop the observer thread (safe to call twice, and before or while :meth:`start` runs)."""
        with self._lock:
            self._stopped = True
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=2)
