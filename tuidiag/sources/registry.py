"""The registry of run kinds: every kind the monitor shows, in the order they claim a directory.

One walk of the root asks each kind, in turn, what a directory holds (tuidiag's own
runs first: a run directory is never read as anything else). The model keeps the
kind each run was found as and opens it with :func:`open_source`; the watcher asks
:func:`owner_of` which run a changed file belongs to. A new kind is one
:class:`~tuidiag.sources.run_source.RunSource` added to :data:`SOURCES`.
"""

from __future__ import annotations

import os
from pathlib import Path

from tuidiag.sources.csv_log_source import CsvLogSource
from tuidiag.sources.own_runs import OwnRuns
from tuidiag.sources.run_source import RunSource
from tuidiag.sources.tensorboard_source import TensorBoardSource
from tuidiag.sources.wandb_source import WandbSource
from tuidiag.store import Run

SOURCES: tuple[RunSource, ...] = (OwnRuns(), TensorBoardSource(), WandbSource(), CsvLogSource())
"""Every kind, in claiming order."""
MAX_DEPTH = 6
"""Directory levels searched below the root (as ``find_runs``)."""


def source(kind: str) -> RunSource:
    """The registered kind named ``kind``; ``KeyError`` for an unknown one."""
    for candidate in SOURCES:
        if candidate.kind == kind:
            return candidate
    raise KeyError(kind)


def discover(root: str | Path, max_depth: int = MAX_DEPTH) -> dict[Path, str]:
    """Every run at or below ``root`` with its kind, sorted by path.

    Symbolic links to directories are not followed and hidden directories are skipped;
    unreadable directories are passed over.
    """
    root = Path(root)
    found: dict[Path, str] = {}
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=lambda _err: None):
        current = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        descend = True
        for kind in SOURCES:
            claim = kind.claim(current, dirnames, filenames)
            if claim is None:
                continue
            for key in claim.runs:
                found.setdefault(key, kind.kind)
            if not claim.descend:
                descend = False
                break
        if not descend or len(current.parts) - base_depth >= max_depth:
            dirnames.clear()
    return dict(sorted(found.items()))


def kind_of(path: Path) -> str | None:
    """The kind of run ``path`` itself is (a run directory of any kind), else ``None``."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return None
    dirnames = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    filenames = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
    for kind in SOURCES:
        claim = kind.claim(path, dirnames, filenames)
        if claim is not None and path in claim.runs:
            return kind.kind
    return None


def locate(path: Path) -> tuple[Path, str] | None:
    """The run a path given on the command line names, with its kind: a run directory of any kind,
    or one of a run's own files (an event file, ``metrics.csv``, ``run-<id>.wandb``, a Keras log); else ``None``."""
    if path.is_dir():
        kind = kind_of(path)
        return (path, kind) if kind is not None else None
    owner = owner_of(path)
    if owner is None:
        return None
    if owner.is_dir():
        kind = kind_of(owner)
        return (owner, kind) if kind is not None else None
    kind = discover(owner.parent, max_depth=0).get(owner)  # a run that is one file
    return (owner, kind) if kind is not None else None


def owner_of(changed: Path, modified: bool = False) -> Path | None:
    """The run a changed file belongs to, of any kind; ``modified``: the file was written in place
    (only kinds whose writers append in place count that as new data)."""
    if changed.name.startswith("."):
        return None
    for kind in SOURCES:
        if modified and not kind.appends_in_place:
            continue
        owner = kind.owner_of(changed)
        if owner is not None:
            return owner
    return None


def open_source(key: Path, kind: str) -> Run:
    """The run at ``key`` read as ``kind``; its ``refresh()`` reads what is new."""
    return source(kind).open(key)
