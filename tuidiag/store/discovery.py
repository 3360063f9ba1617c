"""Finding run directories under a root, recursively, without following symlink loops, and the shards in them.

No pyarrow here: ``tuidiag status`` lists shards without importing it."""

from __future__ import annotations

import os
from pathlib import Path

from tuidiag.format import EVENTS_DIR, MANIFEST_NAME, METRICS_DIR, SHARD_SUFFIX, ShardName


def is_run_dir(path: Path) -> bool:
    """True when ``path`` holds a manifest (of any file type: a damaged one is shown as such,
    not hidden) or a metrics directory."""
    return os.path.lexists(path / MANIFEST_NAME) or (path / METRICS_DIR).is_dir()


def holds_run(path: Path) -> bool:
    """True when ``path`` holds recorded data: a ``run.json`` (of any file type) or a shard.

    Stricter than :func:`is_run_dir`: an empty directory, one with unrelated files
    or with empty ``metrics/`` and ``events/`` folders holds no run, so a recorder may
    start a new one there without mixing two trainings.
    """
    if os.path.lexists(path / MANIFEST_NAME):
        return True
    for table_dir in (METRICS_DIR, EVENTS_DIR):
        try:
            names = os.listdir(path / table_dir)
        except OSError:
            continue
        if any(ShardName.parse(name) is not None for name in names):
            return True
    return False


def find_runs(root: str | Path, max_depth: int = 6) -> list[Path]:
    """Every run directory at or below ``root`` (not descending into runs), sorted by path.

    Symbolic links to directories are not followed, so a link loop cannot hang the
    search; unreadable directories are skipped.
    """
    root = Path(root)
    if is_run_dir(root):
        return [root]
    runs: list[Path] = []
    base_depth = len(root.parts)
    for dirpath, dirnames, _ in os.walk(root, followlinks=False, onerror=lambda _err: None):
        current = Path(dirpath)
        if current != root and is_run_dir(current):
            runs.append(current)
            dirnames.clear()
            continue
        if len(current.parts) - base_depth >= max_depth:
            dirnames.clear()
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return sorted(runs)


Shards = list[tuple[ShardName, Path]]
"""The well-named shards of one table directory, as :func:`list_shards` lists them."""


def list_shards(directory: Path) -> Shards:
    """All well-named shards in ``directory``, sorted by rank and sequence range."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    shards = []
    for name in names:
        parsed = ShardName.parse(name)
        if parsed is not None:
            shards.append((parsed, directory / name))
    shards.sort()
    return shards


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
