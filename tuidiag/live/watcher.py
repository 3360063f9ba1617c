"""Noticing new data under a runs root: a watchdog observer, with a polling fallback.

``RunWatcher`` calls ``on_change(run_dirs)`` from a background thread whenever files
of runs change. inotify does not see writes made on another host (NFS, Lustre), so
the app also polls; ``--poll`` forces polling alone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from tuidiag.format import EVENTS_DIR, MANIFEST_NAME, METRICS_DIR, SHARD_SUFFIX

log = logging.getLogger(__name__)


def run_dir_of(path: Path) -> Path | None:
    """The run directory a changed file belongs to (``None`` for files that do not matter)."""
    if path.name.startswith("."):
        return None
    if path.name == MANIFEST_NAME:
        return path.parent
    if path.suffix == SHARD_SUFFIX and path.parent.name in (METRICS_DIR, EVENTS_DIR):
        return path.parent.parent
    if path.name in (METRICS_DIR, EVENTS_DIR):
        return path.parent
    return None


class _Handler(FileSystemEventHandler):
    def __init__(self, on_change: Callable[[set[Path]], None]) -> None:
        self.on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = [event.src_path, getattr(event, "dest_path", "") or ""]
        dirs = {d for p in paths if p for d in [run_dir_of(Path(str(p)))] if d is not None}
        if dirs:
            self.on_change(dirs)


class RunWatcher:
    """A watchdog observer on ``root``; ``start()`` returns False when it cannot watch."""

    def __init__(self, root: Path, on_change: Callable[[set[Path]], None]) -> None:
        self.root = root
        self.on_change = on_change
        self._observer: Observer | None = None
        self.error: str | None = None

    def start(self) -> bool:
        """Start watching; on failure remember why (the app then polls)."""
        try:
            observer = Observer()
            observer.schedule(_Handler(self.on_change), str(self.root), recursive=True)
            observer.daemon = True
            observer.start()
        except (OSError, RuntimeError) as exc:
            self.error = f"file watching unavailable ({exc}); polling instead"
            log.warning(self.error)
            return False
        self._observer = observer
        return True

    def stop(self) -> None:
        """Stop the observer thread (safe to call twice)."""
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None
