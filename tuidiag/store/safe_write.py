"""Every file tuidiag writes goes through this module: atomic, and never through a link it did not make.

A run directory may be shared (group-writable, on a team disk), so another user can
plant symlinks at the names tuidiag writes. :func:`write_atomic`:

- opens the target's directory once and does everything relative to that open
  directory, so swapping the directory afterwards changes nothing;
- with ``root`` given, opens each directory *below* ``root`` with ``O_NOFOLLOW``: a
  ``jobs/``, ``control/`` or ``metrics/`` that is a symlink is refused (``root``
  itself, a path the user chose, is followed);
- creates the temporary file under a fresh random ``.``-prefixed name with
  ``O_CREAT | O_EXCL | O_NOFOLLOW``: an existing name, a symlink included, is
  never opened, another name is drawn;
- renames it over the final name: a symlink there is replaced, not followed.

Readers ignore names starting with ``.``, so they see a whole file or none.
:func:`append_line`, :func:`create_new` and :func:`claim_text` are the other ways to create a file;
:func:`write_directory_atomic` builds a whole directory the same way, and :func:`rename_within`
is the one rename of an existing file. Every temporary name, of a file or a directory, is
``.<final name>.<16 random hex digits>.partial`` (:func:`temp_names`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from tuidiag.format import TEMP_PREFIX

TEMP_SUFFIX = ".partial"
ATTEMPTS = 100
"""Temporary names drawn before giving up (each one taken already is skipped, never opened)."""
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd and _DIRECTORY != 0
"""Whether this OS can work relative to an open directory (Linux, macOS; not Windows)."""


def _temp_names(directory: Path, name: str) -> Iterator[str]:
    """Candidate temporary names for a file ``name`` in ``directory``: hidden, random, ending in ``.partial``."""
    for _ in range(ATTEMPTS):
        yield f"{TEMP_PREFIX}{name}.{secrets.token_hex(8)}{TEMP_SUFFIX}"


@contextmanager
def open_dir(directory: Path, root: Path | None = None) -> Iterator[int | None]:
    """A file descriptor of ``directory`` (None where the OS has no ``dir_fd``).

    With ``root``, ``directory`` must lie at or below it and no directory between
    them may be a symlink (``OSError(ELOOP)`` or ``ENOTDIR`` otherwise)."""
    if not _DIR_FD:
        yield None
        return
    flags = os.O_RDONLY | _DIRECTORY | _CLOEXEC
    if root is None:
        fd = os.open(directory, flags)
    else:
        parts = directory.relative_to(root).parts  # ValueError: not below root (a caller's mistake)
        fd = os.open(root, flags)
        for part in parts:
            try:
                inner = os.open(part, flags | _NOFOLLOW, dir_fd=fd)
            finally:
                os.close(fd)
            fd = inner
    try:
        yield fd
    finally:
        os.close(fd)


def _create_temp(directory: Path, dir_fd: int | None, name: str, mode: int) -> tuple[int, str]:
    """Create a fresh temporary file for ``name``; returns ``(fd, temp name)``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for candidate in _temp_names(directory, name):
        try:
            if dir_fd is None:
                return os.open(directory / candidate, flags, mode), candidate
            return os.open(candidate, flags, mode, dir_fd=dir_fd), candidate
        except FileExistsError:
            continue  # taken, maybe by a planted link: never open it, draw another name
    raise FileExistsError(f"no free temporary name for {name} in {directory} after {ATTEMPTS} tries")


def write_atomic(path: Path, fill: Callable[[BinaryIO], object], *, mode: int = 0o666,
                 fsync: bool = False, root: Path | None = None) -> Path:
    """Write ``path`` through ``fill(binary file)``: a fresh temporary file, then a rename.

    ``mode`` is applied with the process umask (``0o600``: owner only). Raises ``OSError``
    when the directory cannot be written, or a directory below ``root`` is a symlink;
    the temporary file is removed whatever happens."""
    path = Path(path)
    with open_dir(path.parent, root) as dir_fd:
        fd, temp = _create_temp(path.parent, dir_fd, path.name, mode)
        done = False
        try:
            with os.fdopen(fd, "wb") as handle:
                fill(handle)
                handle.flush()
                if fsync:
                    os.fsync(handle.fileno())
            if dir_fd is None:
                os.replace(path.parent / temp, path)
            else:
                os.replace(temp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            done = True
        finally:
            if not done:
                try:
                    if dir_fd is None:
                        os.unlink(path.parent / temp)
                    else:
                        os.unlink(temp, dir_fd=dir_fd)
                except OSError:
                    pass
    return path


def write_text_atomic(path: Path, text: str, *, mode: int = 0o666, fsync: bool = False, root: Path | None = None) -> Path:
    """:func:`write_atomic` of ``text`` as UTF-8."""
    data = text.encode("utf-8")
    return write_atomic(path, lambda handle: handle.write(data), mode=mode, fsync=fsync, root=root)


def append_line(path: Path, line: str, *, mode: int = 0o600, root: Path | None = None) -> None:
    """Append ``line`` and a newline to ``path`` (created if missing), never through a symlink.

    One ``write`` of ``O_APPEND``: concurrent appenders never interleave inside a line.
    The file must be a regular file owned by this process's user."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)
    with open_dir(path.parent, root) as dir_fd:
        fd = os.open(path.name, flags, mode, dir_fd=dir_fd) if dir_fd is not None else os.open(path, flags, mode)
        try:
            _check_own_regular(fd, path)
            os.write(fd, data)
        finally:
            os.close(fd)


def create_new(path: Path, *, mode: int = 0o600, root: Path | None = None) -> None:
    """Create the empty file ``path``; ``FileExistsError`` when any entry (a symlink too) is there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    with open_dir(path.parent, root) as dir_fd:
        fd = os.open(path.name, flags, mode, dir_fd=dir_fd) if dir_fd is not None else os.open(path, flags, mode)
        os.close(fd)


def claim_text(path: Path, text: str, *, mode: int = 0o666, root: Path | None = None) -> bool:
    """Create ``path`` holding ``text`` only if no entry of that name exists; ``False`` when one does.

    Whole and exclusive: the text goes into a fresh temporary file (as :func:`write_atomic`),
    which is then hard-linked to ``path`` (a link never replaces an entry, nor follows a
    symlink planted there), so of two writers claiming at once exactly one wins and a reader
    never sees half a file. Where hard links are not supported, an ``O_EXCL | O_NOFOLLOW``
    create is used. Other ``OSError`` (read-only, disk full) are raised."""
    path = Path(path)
    data = text.encode("utf-8")
    with open_dir(path.parent, root) as dir_fd:
        fd, temp = _create_temp(path.parent, dir_fd, path.name, mode)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            try:
                if dir_fd is None:
                    os.link(path.parent / temp, path, follow_symlinks=False)
                else:
                    os.link(temp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                return True
            except FileExistsError:
                return False
            except OSError:  # no hard links here (some network or FAT filesystems)
                pass
        finally:
            try:
                os.unlink(temp, dir_fd=dir_fd) if dir_fd is not None else os.unlink(path.parent / temp)
            except OSError:
                pass
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(path.name, flags, mode, dir_fd=dir_fd) if dir_fd is not None else os.open(path, flags, mode)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return True


def rename_within(directory: Path, old: str, new: str, *, root: Path | None = None) -> None:
    """Rename the entry ``old`` of ``directory`` to ``new`` in the same directory, atomically.

    A rename never follows a link at either name; with ``root``, no directory below it may be a
    symlink (as :func:`write_atomic`). ``FileNotFoundError`` when ``old`` is gone."""
    directory = Path(directory)
    with open_dir(directory, root) as dir_fd:
        if dir_fd is None:
            os.rename(directory / old, directory / new)
        else:
            os.rename(old, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _reserve_temp_dir(directory: Path, name: str) -> Path:
    """Create a fresh empty temporary directory for ``name`` in ``directory`` (an entry there, a link too, is skipped)."""
    for candidate in _temp_names(directory, name):
        try:
            (directory / candidate).mkdir()
            return directory / candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name} in {directory} after {ATTEMPTS} tries")


def write_directory_atomic(target: Path, fill: Callable[[Path], object]) -> Path:
    """Build the directory ``target`` through ``fill(temporary directory)``, then rename it into place.

    The directory is built under a temporary name next to ``target`` (readers skip it) and
    renamed to ``target``, so a reader sees the whole directory or none. A directory already
    at ``target`` is first renamed aside, onto an empty temporary directory made for it (so
    the rename never lands on an entry someone else planted), and deleted once the new one is
    in place (put back if it cannot be). The temporary directory is removed whatever happens."""
    target = Path(target)
    building = _reserve_temp_dir(target.parent, target.name)
    try:
        fill(building)
        old = None
        if target.exists():
            old = _reserve_temp_dir(target.parent, target.name)
            os.rename(target, old)  # over its own empty directory: a link planted there fails the rename
        try:
            os.rename(building, target)
        except OSError:
            if old is not None:  # put the old directory back rather than leave nothing at target
                os.rename(old, target)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return target


def _check_own_regular(fd: int, path: Path) -> None:
    """Raise ``PermissionError`` unless ``fd`` is a regular file owned by this user."""
    info = os.fstat(fd)
    geteuid = getattr(os, "geteuid", None)
    if not stat.S_ISREG(info.st_mode) or (geteuid is not None and info.st_uid != geteuid()):
        raise PermissionError(f"{path} is not a regular file of this user; not writing to it")


__all__ = ["append_line", "claim_text", "create_new", "open_dir", "rename_within", "write_atomic",
           "write_directory_atomic", "write_text_atomic"]
