"""Finding run directories under a root, recursively, without following symlink loops."""

from __future__ import annotations

import os
from pathlib import Path

from tuidiag.format import MANIFEST_NAME, METRICS_DIR


def is_run_dir(path: Path) -> bool:
    """True when ``path`` holds a manifest or a metrics directory."""
    return (path / MANIFEST_NAME).is_file() or (path / METRICS_DIR).is_dir()


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
