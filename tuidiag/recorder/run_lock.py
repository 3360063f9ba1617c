"""One writer per run directory: an exclusive lock on ``RUN/.lock``, held for the recorder's life.

Rank 0's recorder takes the lock before it claims or continues a run and keeps the
file open until ``close()``; the kernel drops it when the process dies (SIGKILL
included), so a lock left by a dead process is simply taken over. The file names
the holder (pid, host, start time) for the message a second recorder gives.

The lock is ``flock`` on an open file description, so two recorders in one
process conflict as two processes do; a process-wide table covers filesystems
where ``flock`` is emulated by per-process POSIX locks (NFS). Where no lock can be
taken at all (a read-only disk, a filesystem without locks, a symlink planted as
``.lock``), :func:`take` answers ``None`` and the caller falls back on the
manifest's heartbeat and pid.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no flock; the manifest's heartbeat stays the only guard
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"
"""The lock file inside a run directory (hidden: readers and discovery ignore it)."""
MAX_HOLDER_BYTES = 4096

_held: dict[tuple[int, int], "RunLock"] = {}
"""Locks this process holds, by (device, inode) of their file."""
_table_lock = threading.Lock()


@dataclass(frozen=True)
class Busy:
    """Another recorder holds the lock; ``holder`` is what its lock file says."""

    holder: dict[str, Any]

    def describe(self) -> str:
        """"pid 123 on host-a since 12:00:01" (or what is known of it)."""
        pid, host, since = self.holder.get("pid"), self.holder.get("host"), self.holder.get("since")
        text = f"pid {pid if isinstance(pid, int) else '?'} on {host if isinstance(host, str) else '?'}"
        if isinstance(since, (int, float)):
            text += time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(since))
        return text


class RunLock:
    """A held lock on one run directory; :meth:`release` (or process exit) gives it up."""

    def __init__(self, fd: int, path: Path, key: tuple[int, int]) -> None:
        self.path = path
        self._fd: int | None = fd
        self._key = key

    @property
    def fd(self) -> int:
        """The descriptor holding the lock (-1 once released)."""
        return -1 if self._fd is None else self._fd

    @property
    def held(self) -> bool:
        """True until :meth:`release`."""
        return self._fd is not None

    def release(self) -> None:
        """Clear the holder's name and unlock; safe to call twice, never raises."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with _table_lock:
            if _held.get(self._key) is self:
                del _held[self._key]
        _label(self.path, fd, "")
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass
        finally:
            os.close(fd)


def take(run_dir: Path) -> RunLock | Busy | None:
    """Lock ``run_dir`` for this recorder without waiting.

    Returns the held :class:`RunLock`; :class:`Busy` when another recorder (in this
    process or another) holds it; ``None`` when no lock can be taken here.

    The lock is held through a read-only descriptor where the filesystem allows it,
    so a running training never keeps its disk from being remounted read-only; NFS
    needs a writable one for an exclusive lock.
    """
    if fcntl is None:
        return None
    path = run_dir / LOCK_NAME
    mine = _held_here(path)
    if mine is not None:  # never open a second descriptor of it: on NFS closing that one drops the lock
        return Busy(_read_holder(mine.fd))
    try:  # create it (a read-only disk, a missing directory, a symlink planted as .lock: no lock here)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
    except OSError:
        return None
    for flags in (os.O_RDONLY, os.O_RDWR):
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        taken = _lock(fd, path)
        if taken != "retry":
            return taken
    return None


def _lock(fd: int, path: Path) -> RunLock | Busy | None | str:
    """flock ``fd`` (closed unless the lock is taken); ``"retry"``: this filesystem wants a writable descriptor."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        key = (info.st_dev, info.st_ino)
        with _table_lock:
            mine = _held.get(key)
            if mine is not None and mine.held:  # another thread of this process took it a moment ago
                os.close(fd)
                return Busy(_read_holder(mine.fd))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                return Busy(holder)
            lock = _held[key] = RunLock(fd, path, key)
    except OSError as exc:  # EBADF: NFS locks need write access; ENOLCK and the like: no locks here
        os.close(fd)
        return "retry" if exc.errno == errno.EBADF else None
    _label(path, fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
    return lock


def _label(path: Path, fd: int, text: str) -> None:
    """Write who holds the lock into its file (``""``: nobody); the lock holds without its label."""
    try:
        writable = fd if _is_writable(fd) else os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.ftruncate(writable, 0)
            os.pwrite(writable, text.encode("utf-8"), 0)
        finally:
            if writable != fd:
                os.close(writable)
    except OSError:
        pass


def _is_writable(fd: int) -> bool:
    return (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE) != os.O_RDONLY


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, MAX_HOLDER_BYTES, 0)
        holder = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _held_here(path: Path) -> "RunLock | None":
    """The lock this process already holds on ``path``'s file, if any."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    with _table_lock:
        mine = _held.get((info.st_dev, info.st_ino))
    return mine if mine is not None and mine.held else None
