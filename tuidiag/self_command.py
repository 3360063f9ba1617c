"""How tuidiag starts itself in a subprocess: its own code, never a module from the working directory.

``python -m tuidiag`` puts the working directory first on ``sys.path``, so a
``tuidiag.py``, ``json.py`` or ``numpy.py`` there would run instead of ours. Every
process tuidiag starts (the status line's background refresh, a job the monitor
runs, the ``--web`` monitor's app) runs :func:`command`::

    python -I -c "<put back the parent's import path>; from tuidiag.cli.main import main" ARGS

``-I`` (isolated mode) leaves out the working directory, ``PYTHONPATH``, the user's
site directory and the ``PYTHON*`` variables; the bootstrap then puts back the
import path *this* process uses: its absolute entries, in the same order, minus
the working directory, plus the directory holding this tuidiag package. The child
imports the same tuidiag and the same libraries as its parent, whichever way
tuidiag was installed (a wheel, ``pip install --user``, a source checkout on
``PYTHONPATH``), and nothing from where the user happens to stand.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
"""The directory that holds the ``tuidiag`` package this process runs."""
BOOTSTRAP = "import sys; sys.path[:0] = {path!r}; sys.argv[0] = 'tuidiag'; from tuidiag.cli.main import main; sys.exit(main())"


def import_path(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The child's import path: this process's absolute ``sys.path`` entries except ``cwd``
    (default: the current directory), with :data:`PACKAGE_ROOT` first if it is not among them."""
    here = os.path.realpath(cwd if cwd is not None else os.getcwd())
    path: list[str] = []
    for entry in sys.path:
        if not isinstance(entry, str) or not os.path.isabs(entry) or entry in path:
            continue
        if os.path.realpath(entry) == here and os.path.realpath(entry) != PACKAGE_ROOT:
            continue
        path.append(entry)
    return path if PACKAGE_ROOT in path else [PACKAGE_ROOT, *path]


def command(*args: str, cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The argv that runs ``tuidiag ARGS`` isolated from the working directory ``cwd`` the child gets."""
    return [sys.executable, "-I", "-c", BOOTSTRAP.format(path=import_path(cwd)), *map(str, args)]


def shell_command(*args: str, cwd: str | os.PathLike[str] | None = None) -> str:
    """:func:`command` as one shell-quoted string (for a server that starts it through a shell)."""
    return " ".join(shlex.quote(part) for part in command(*args, cwd=cwd))


def shown(*args: str) -> str:
    """The command as a user would type it, for a confirmation: ``tuidiag ARGS``."""
    return " ".join(shlex.quote(part) for part in ("tuidiag", *map(str, args)))


__all__ = ["BOOTSTRAP", "PACKAGE_ROOT", "command", "import_path", "shell_command", "shown"]
