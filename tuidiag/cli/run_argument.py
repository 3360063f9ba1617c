"""Helpers shared by subcommands: opening a run given on the command line, printing safely."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tuidiag.store.discovery import is_run_dir
from tuidiag.text.safe import clean

if TYPE_CHECKING:
    from tuidiag.store import Run

NOT_A_RUN = ("is not a run (no run.json or metrics/, TensorBoard event files, W&B run-*.wandb log or CSV metrics log "
             "inside)")


class RunNotReadable(Exception):
    """The path given is not a run that can be read (exit status 2)."""


def load_run(path: str | Path, foreign: bool = False) -> Run:
    """Open the run at ``path``; raise :class:`RunNotReadable` with a message a user can act on.

    ``foreign``: also another tracker's run (a TensorBoard, W&B or CSV log, or one of its
    files), read in place through :mod:`tuidiag.sources`, once, never written to; for
    the commands that write nothing beside the run (``diagnose``, ``compare``)."""
    from tuidiag.sources import KIND_TUIDIAG, locate, open_source  # here: ``tuidiag status`` uses this module
    from tuidiag.store import open_run  # without the reader's pyarrow

    path = Path(path)
    if not path.exists():
        raise RunNotReadable(f"{path} does not exist")
    found = (path, KIND_TUIDIAG) if path.is_dir() and is_run_dir(path) else locate(path) if foreign else None
    if found is None:
        if foreign and path.is_file():
            what = ("is not a log tuidiag reads in place (a metrics.csv, a CSV whose first column is epoch, a TensorBoard "
                    "event file or a W&B run-*.wandb log)")
            hint = f"tuidiag import csv {path} RUNS_DIR" if path.suffix.lower() == ".csv" else f"tuidiag ls {path.parent}"
        else:
            what = NOT_A_RUN if foreign else "is not a tuidiag run (no run.json or metrics/ inside)"
            hint = f"tuidiag ls {path}"
        raise RunNotReadable(f"{path} {what}; try: {hint}")
    if found[1] != KIND_TUIDIAG:
        return open_source(*found)
    try:
        return open_run(found[0])
    except OSError as exc:
        raise RunNotReadable(f"cannot read {path}: {exc}") from exc


def fail(command: str, message: str) -> int:
    """Print ``tuidiag COMMAND: message`` on stderr and return exit status 2."""
    print(f"tuidiag {command}: {clean(message)}", file=sys.stderr)
    return 2
