"""Helpers shared by subcommands: opening a run given on the command line, printing safely."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tuidiag.store.discovery import is_run_dir
from tuidiag.text.safe import clean

if TYPE_CHECKING:
    from tuidiag.store import Run


class RunNotReadable(Exception):
    """The path given is not a run that can be read (exit status 2)."""


def load_run(path: str | Path) -> Run:
    """Open the run at ``path``; raise :class:`RunNotReadable` with a message a user can act on."""
    from tuidiag.store import open_run  # here: ``tuidiag status`` uses this module without the reader's pyarrow

    path = Path(path)
    if not path.exists():
        raise RunNotReadable(f"{path} does not exist")
    if not path.is_dir() or not is_run_dir(path):
        raise RunNotReadable(f"{path} is not a tuidiag run (no run.json or metrics/ inside); try: tuidiag ls {path}")
    try:
        return open_run(path)
    except OSError as exc:
        raise RunNotReadable(f"cannot read {path}: {exc}") from exc


def fail(command: str, message: str) -> int:
    """Print ``tuidiag COMMAND: message`` on stderr and return exit status 2."""
    print(f"tuidiag {command}: {clean(message)}", file=sys.stderr)
    return 2
