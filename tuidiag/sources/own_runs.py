"""tuidiag's own runs (written by the recorder or ``tuidiag import``) as one kind of run source."""

from __future__ import annotations

from pathlib import Path

from tuidiag.sources.run_source import KIND_TUIDIAG, Claim, RunSource
from tuidiag.store import Run, open_run
from tuidiag.store.discovery import is_run_dir, run_dir_of


class OwnRuns(RunSource):
    """A directory with ``run.json`` or ``metrics/``; runs do not nest, so the search stops there."""

    kind = KIND_TUIDIAG

    def claim(self, directory: Path, dirnames: list[str], filenames: list[str]) -> Claim | None:
        """``directory`` itself when it is a run directory."""
        return Claim((directory,)) if is_run_dir(directory) else None

    def owner_of(self, changed: Path) -> Path | None:
        """The run of a manifest or shard (:func:`~tuidiag.store.discovery.run_dir_of`)."""
        return run_dir_of(changed)

    def open(self, key: Path) -> Run:
        """The run directory, read by the store's reader."""
        return open_run(key)
