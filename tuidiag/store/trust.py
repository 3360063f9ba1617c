"""Which files and directories tuidiag trusts: those no other user can write.

One rule for everything that makes tuidiag act: a control request (the training
runs it), the control directory, and the directory a factory module is imported
from. A **file** is trusted when it is a regular file (not a symlink, FIFO or
device) owned by the user tuidiag runs as, and neither its group nor others may
write it. A **directory** is trusted when it, and every directory above it, is owned
by that user or root and writable by neither group nor others; a directory above it
may be writable by others when its sticky bit is set (``/tmp``): then nobody else
can rename or delete what is in it. On systems without file owners (Windows) every
path is trusted.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def current_uid() -> int | None:
    """The effective user id, or None on a system without one (Windows)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else None


def info_problem(info: os.stat_result, uid: int | None) -> str | None:
    """Why a file with this ``stat`` may not be trusted by ``uid`` (None when it may)."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (symlinks are refused)"
    if uid is None:
        return None
    if info.st_uid != uid:
        return f"owned by uid {info.st_uid}, not by uid {uid}"
    if info.st_mode & WRITABLE_BY_OTHERS:
        return "writable by group or others"
    return None


def file_problem(path: Path, uid: int | None) -> str | None:
    """Why the file ``path`` (not followed if a symlink) may not be trusted by ``uid``."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return info_problem(info, uid)


def _dir_entry_problem(path: Path, uid: int, is_target: bool) -> str | None:
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"{path} is unreadable ({exc.strerror or exc})"
    if stat.S_ISLNK(info.st_mode):
        return None  # judged by the directory holding it (who may re-point it) and by its target
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid not in (uid, 0):
        return f"{path} is owned by uid {info.st_uid}, not by uid {uid} or root"
    if info.st_mode & WRITABLE_BY_OTHERS and (is_target or not info.st_mode & stat.S_ISVTX):
        return f"{path} is writable by group or others"
    return None


def dir_problem(path: Path, uid: int | None = None) -> str | None:
    """Why another user could change what the directory ``path`` holds (None when nobody can).

    Checks the path as written (every symlink in it sits in a directory nobody else
    can write) and the path it resolves to."""
    uid = current_uid() if uid is None else uid
    if uid is None:
        return None
    written = Path(os.path.abspath(path))
    try:
        resolved = written.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        return f"{path} is unreadable ({exc})"
    for chain in (written, resolved):
        for depth, directory in enumerate([chain, *chain.parents]):
            problem = _dir_entry_problem(directory, uid, is_target=depth == 0 and chain is resolved)
            if problem is not None:
                return problem
    return None


__all__ = ["current_uid", "dir_problem", "file_problem", "info_problem"]
