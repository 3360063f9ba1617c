"""Where a recorder writes: the run it continues, or a fresh directory; never a mixture of two trainings.

``Recorder(dir, resume=...)``:

- ``"never"`` (default): if ``dir`` holds a run, record into the next free
  ``dir-N`` (the highest ``N`` among the existing siblings, plus one) and say so
  once on stderr. A directory that holds no run (absent, empty, unrelated files) is used.
- ``"allow"``: continue the run in ``dir`` if there is one, else start one there.
- ``"must"``: continue the run in ``dir``; raise :class:`ResumeError` if there is none.

A run directory has one writer. Rank 0 locks it (``RUN/.lock``,
:mod:`tuidiag.recorder.run_lock`) before it claims or continues a run and holds
the lock until ``close()`` or its death. A run whose lock another recorder holds,
in this process or another, or that another live process is writing (status
``running``, fresh heartbeat, pid alive: a writer that takes no lock) is never
joined: ``"allow"`` records into ``dir-N`` instead and ``"must"`` raises. A run
last written from another host moments ago is waited on until it goes stale or
beats again. A fresh directory is claimed by creating its ``run.json``
exclusively, so recorders started at the same moment get different directories.

Ranks other than 0 do not choose: they wait (up to :data:`FOLLOW_TIMEOUT`
seconds) for rank 0's ``run.json`` of the same launch, in ``dir`` or a
``dir-N``, and record there.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tuidiag.format import STATUS_RUNNING
from tuidiag.recorder import run_lock
from tuidiag.recorder.run_lock import Busy, RunLock
from tuidiag.store.discovery import holds_run
from tuidiag.store.manifest import STALE_AFTER_MIN_SECONDS, claim_manifest, effective_status, read_manifest

RESUME_NEVER, RESUME_ALLOW, RESUME_MUST = "never", "allow", "must"
RESUME_MODES = (RESUME_NEVER, RESUME_ALLOW, RESUME_MUST)
STALE_WAIT = STALE_AFTER_MIN_SECONDS + 5.0
"""Seconds rank 0 waits for a run written from another host to go stale before deciding it is live."""
STALE_POLL = 0.2
FOLLOW_TIMEOUT = STALE_WAIT + 30.0
"""Seconds a rank other than 0 waits for rank 0's ``run.json`` before recording into ``dir`` itself
(longer than rank 0 may wait for a stale run)."""
LAUNCH_SLACK = 30.0
"""Rank 0's session may have started this long before this process (clocks of different hosts)."""
MAX_SUFFIX_TRIES = 1000
_IMPORTED = time.time()
_followed: dict[str, float] = {}
"""Per requested directory, the start time of the rank-0 session this process last joined."""


class ResumeError(ValueError):
    """``resume="must"`` found no run to continue, or one that another process is still writing."""


class UnusablePathError(ValueError):
    """The run directory asked for cannot be used; the recorder records beside it (reported, never raised)."""


class RankZeroNotFound(RuntimeError):
    """A rank other than 0 found no run directory started by rank 0 of its launch in time."""


@dataclass
class Placement:
    """Where this recorder writes, and what it found there."""

    run_dir: Path
    previous: dict[str, Any] | None = None
    """The manifest of the run being continued (rank 0), or rank 0's manifest (other ranks); ``None``: a new run."""
    note: str | None = None
    """One line for stderr when the directory is not the one asked for."""
    error: Exception | None = None
    """Why the directory could not be created or claimed (reported as a start error, never raised)."""
    lock: RunLock | None = None
    """Rank 0's lock on ``run_dir``, held until the recorder closes (``None``: none could be taken there)."""


def check_mode(resume: str) -> str:
    """``resume`` if it is a known mode; raises ``ValueError`` otherwise."""
    if resume not in RESUME_MODES:
        raise ValueError(f"resume must be one of {', '.join(map(repr, RESUME_MODES))}, not {resume!r}")
    return resume


def usable_dir(requested: Path) -> tuple[Path, str | None]:
    """``requested``, or the directory to record into instead and what is wrong with the path
    (``"is not valid UTF-8"``), when it cannot be used.

    A path holding a NUL character, or bytes that are not UTF-8 (a name decoded with
    ``surrogateescape``), cannot hold a run: the OS refuses the first, and Parquet, and
    so every reader of the run, takes paths as UTF-8 only. The run goes to the same path
    with each such character written ``%XX`` (``runs/bad\\xff`` -> ``runs/bad%FF``).
    """
    text = str(requested)
    if "\x00" in text:
        problem = "holds a NUL character"
    else:
        try:
            text.encode("utf-8")
            return requested, None
        except UnicodeEncodeError:
            problem = "is not valid UTF-8"
    escaped = "".join(_escape_char(c) for c in text)
    return Path(escaped), problem


def _escape_char(char: str) -> str:
    code = ord(char)
    if code == 0:
        return "%00"
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as surrogateescape keeps it
        return f"%{code - 0xDC00:02X}"
    if 0xD800 <= code <= 0xDFFF:  # any other lone surrogate
        return f"%u{code:04X}"
    return char


def launch_key(world_size: int) -> str:
    """What all ranks of one distributed launch share (rendezvous address, port, id and size)."""
    env = os.environ
    return "|".join([env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", ""), env.get("TORCHELASTIC_RUN_ID", ""), str(world_size)])


def place(requested: Path, resume: str, manifest_for: Callable[[Path], dict[str, Any]], rank: int = 0,
          key: str = "", follow_timeout: float | None = None) -> Placement:
    """Choose (and for rank 0, claim) the directory to record into; see the module docstring.

    ``manifest_for(path)`` builds the manifest a new run in ``path`` starts with.
    Raises only :class:`ResumeError` (``resume="must"``); file system errors come back in
    :attr:`Placement.error`.
    """
    check_mode(resume)
    if rank != 0:
        return follow(requested, key, follow_timeout)
    if resume != RESUME_NEVER and holds_run(requested):
        lock = run_lock.take(requested)
        if isinstance(lock, Busy):
            return _not_joining(requested, resume, manifest_for, f"another recorder ({lock.describe()}) holds its lock")
        previous = _manifest_or_none(requested) or {}
        if _live(previous) and previous.get("host") != socket.gethostname():
            previous = _await_stale(requested, previous)
        if not _live(previous):
            return Placement(requested, previous, lock=lock)
        if lock is not None:
            lock.release()
        return _not_joining(requested, resume, manifest_for,
                            f"another process (pid {previous.get('pid')} on {previous.get('host')}) is writing it")
    if resume == RESUME_MUST:
        raise ResumeError(f"resume='must': {requested} holds no run to continue")
    return _fresh(requested, manifest_for, "already holds a run")


def _not_joining(requested: Path, resume: str, manifest_for: Callable[[Path], dict[str, Any]], why: str) -> Placement:
    """A run another writer is writing: ``"must"`` raises, ``"allow"`` records into a fresh ``dir-N``."""
    if resume == RESUME_MUST:
        raise ResumeError(f"resume='must': {requested} is still being written: {why}; not joining it")
    return _fresh(requested, manifest_for, f"is still being written by another process ({why})")


def _fresh(requested: Path, manifest_for: Callable[[Path], dict[str, Any]], reason: str) -> Placement:
    """Claim ``requested`` if it holds no run, else the next free ``requested-N``."""
    candidate, tries = requested, 0
    while tries < MAX_SUFFIX_TRIES:
        tries += 1
        try:
            candidate.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # a file of that name: not ours to write into
            reason = "exists and is not a directory" if candidate == requested else reason
            candidate = _next_sibling(requested, candidate)
            continue
        except OSError as exc:
            return Placement(candidate, note=_note(requested, candidate, reason), error=exc)
        try:
            claimed, lock = _claim(candidate, manifest_for)
        except OSError as exc:
            return Placement(candidate, note=_note(requested, candidate, reason), error=exc)
        if claimed:
            return Placement(candidate, note=_note(requested, candidate, reason), lock=lock)
        candidate = _next_sibling(requested, candidate)
    return Placement(candidate, error=FileExistsError(f"no free directory among {requested}-1 ... {candidate}"))


def _claim(candidate: Path, manifest_for: Callable[[Path], dict[str, Any]]) -> tuple[bool, RunLock | None]:
    """Lock ``candidate`` and start a run in it: ``(True, lock)`` (``lock`` is ``None`` where
    none can be taken), ``(False, None)`` when it holds a run or another recorder got it first.
    ``OSError`` (read-only, disk full) is raised."""
    if holds_run(candidate):
        return False, None
    lock = run_lock.take(candidate)
    if isinstance(lock, Busy):
        return False, None
    try:
        claimed = claim_manifest(candidate, manifest_for(candidate))
    except OSError:
        if lock is not None:
            lock.release()
        raise
    if not claimed and lock is not None:
        lock.release()
    return claimed, lock if claimed else None


def _next_sibling(requested: Path, tried: Path) -> Path:
    """``requested-N`` for an ``N`` above every existing sibling's and above the one just tried."""
    taken = suffixes(requested)
    tried_n = suffix_of(requested, tried) or 0
    return requested.parent / f"{requested.name}-{max(taken + [tried_n]) + 1}"


def suffix_of(requested: Path, path: Path) -> int | None:
    """``N`` when ``path`` is ``requested-N``, else ``None``."""
    match = re.fullmatch(re.escape(requested.name) + r"-(\d+)", path.name)
    return int(match.group(1)) if match and path.parent == requested.parent else None


def suffixes(requested: Path) -> list[int]:
    """The ``N`` of every existing ``requested-N`` sibling."""
    try:
        names = os.listdir(requested.parent if str(requested.parent) else ".")
    except OSError:
        return []
    found = (suffix_of(requested, requested.parent / name) for name in names)
    return [n for n in found if n is not None]


def _note(requested: Path, chosen: Path, reason: str) -> str | None:
    if chosen == requested:
        return None
    return (f"tuidiag: {requested} {reason}; recording this training into {chosen} "
            f"(Recorder(..., resume='allow') continues a run instead)")


def _manifest_or_none(path: Path) -> dict[str, Any] | None:
    try:
        return read_manifest(path)
    except Exception:  # missing, malformed, too deep (RecursionError): a run.json that says nothing
        return None


def _live(manifest: dict[str, Any]) -> bool:
    """True when another process still writes this run (status running, beating, pid alive)."""
    try:
        return bool(manifest) and manifest.get("status") == STATUS_RUNNING and effective_status(manifest) == STATUS_RUNNING
    except Exception:  # a hand-edited run.json (odd types): not a writer anyone can be sure of
        return False


def _await_stale(path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A run written from another host whose heartbeat is still fresh: a training killed there
    moments ago (preempted, requeued here), or one still running. Its pid cannot be checked
    from here, so wait (up to :data:`STALE_WAIT` seconds) until its heartbeat goes stale (it
    died: continue it) or beats again (it is alive: never join it). Returns the manifest as
    last read."""
    beat = manifest.get("heartbeat")
    print(f"tuidiag: {path} was being written from {manifest.get('host')} moments ago; "
          f"waiting up to {STALE_WAIT:.0f} s to tell whether that training is still running", file=sys.stderr)
    deadline = time.monotonic() + STALE_WAIT
    current = manifest
    while time.monotonic() < deadline:
        time.sleep(STALE_POLL)
        current = _manifest_or_none(path) or {}
        if current.get("heartbeat") != beat or not _live(current):
            break
    return current


def follow(requested: Path, key: str, timeout: float | None = None) -> Placement:
    """A rank other than 0: the directory whose ``run.json`` rank 0 of this launch wrote.

    Waits up to ``timeout`` seconds (default :data:`FOLLOW_TIMEOUT`) for it to appear.
    """
    timeout = FOLLOW_TIMEOUT if timeout is None else timeout
    started_after = max(process_start_time() - LAUNCH_SLACK, _followed.get(str(requested), float("-inf")) + 1e-6)
    deadline = time.monotonic() + timeout
    while True:
        found = _rank_zero_dir(requested, key, started_after)
        if found is not None:
            path, manifest = found
            _followed[str(requested)] = float(manifest["session"]["started"])
            return Placement(path, manifest)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    error: Exception = RankZeroNotFound(f"no run started by rank 0 of this launch appeared in {requested} "
                                        f"or a {requested.name}-N within {timeout:.0f} s; recording into {requested}")
    try:
        requested.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        error = exc
    return Placement(requested, None, error=error)


def _rank_zero_dir(requested: Path, key: str, started_after: float) -> tuple[Path, dict[str, Any]] | None:
    """The newest candidate directory whose live manifest names this launch's session."""
    best: tuple[float, Path, dict[str, Any]] | None = None
    for path in [requested] + [requested.parent / f"{requested.name}-{n}" for n in suffixes(requested)]:
        manifest = _manifest_or_none(path)
        session = manifest.get("session") if manifest else None
        if not isinstance(session, dict) or session.get("launch") != key:
            continue
        started = session.get("started")
        if not isinstance(started, (int, float)) or started < started_after or not _live(manifest):
            continue
        if best is None or started > best[0]:
            best = (float(started), path, manifest)
    return (best[1], best[2]) if best else None


def process_start_time() -> float:
    """When this process started (from ``/proc``), else when tuidiag's recorder was imported."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        with open("/proc/stat", encoding="ascii") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime"))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED
