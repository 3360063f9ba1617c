"""The run manifest ``run.json``: identity, config, status and heartbeat.

The recorder rewrites the manifest atomically at each flush (its heartbeat), so a
reader can tell a live run from a finished one and from one killed without
``close()``: status ``running`` with a dead pid on this host, or with a heartbeat
much older than the flush interval, reads as crashed.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tuidiag.format import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    STATUS_CRASHED,
    STATUS_RUNNING,
)
from tuidiag.store.safe_write import claim_text, write_text_atomic
from tuidiag.store.limits import MAX_MANIFEST_BYTES, read_json_bounded

STALE_AFTER_MIN_SECONDS = 30.0
"""A running run whose heartbeat is older than this (or 10 flush intervals) is crashed."""


def new_manifest(name: str, config: dict[str, Any], world_size: int, flush_interval: float) -> dict[str, Any]:
    """Build the manifest of a new run with everything known at start-up."""
    now = time.time()
    return {
        "format_version": FORMAT_VERSION,
        "run_id": uuid.uuid4().hex,
        "name": name,
        "created": now,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "uid": _uid(),
        "command": recorded_command(),
        "cwd": working_directory(),
        "config": jsonable(config),
        "versions": library_versions(),
        "world_size": world_size,
        "flush_interval": flush_interval,
        "status": STATUS_RUNNING,
        "heartbeat": now,
        "ended": None,
        "last_step": None,
        "stats": {},
    }


def recorded_command(argv: list[str] | None = None) -> list[str]:
    """``sys.argv`` with its first entry made absolute when it names a file.

    ``python train.py`` records ``/home/me/project/train.py``, so a job started later
    from another directory still finds the training script's directory (where the
    factory's module usually is). Other first entries (``-c``, an empty string) stay."""
    command = [str(part) for part in (sys.argv if argv is None else argv)]
    try:
        if command and command[0] not in ("", "-c", "-m") and os.path.isfile(command[0]):
            command[0] = os.path.abspath(command[0])
    except (OSError, ValueError):  # a path the OS refuses (a NUL byte): recorded as given
        pass
    return command


def working_directory() -> str | None:
    """The absolute working directory of the recording process; None when it no longer exists."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _uid() -> int | None:
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid else None


def library_versions() -> dict[str, str]:
    """Versions of Python and of the libraries a run's numbers depend on (a new dict per call)."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """Looked up once per process: each ``metadata.version`` scans every ``sys.path`` entry's
    distributions (3-30 ms per recorder started, 8 s of the test suite's CPU before this cache)."""
    from importlib import metadata

    versions = [("python", sys.version.split()[0])]
    for package in ("tuidiag", "torch", "numpy", "pyarrow"):
        try:
            versions.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(versions)


def jsonable(value: Any) -> Any:
    """Turn a config value into something ``json.dumps`` accepts, losing no information silently.

    Never raises: cycles, deep nesting and objects whose ``repr`` fails become placeholders
    (:func:`tuidiag.store.json_values.to_json`)."""
    from tuidiag.store.json_values import to_json

    return to_json(value).value


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write ``run.json`` atomically (temporary file, then rename)."""
    write_text_atomic(run_dir / MANIFEST_NAME, json.dumps(manifest, indent=1, allow_nan=False))


def claim_manifest(run_dir: Path, manifest: dict[str, Any]) -> bool:
    """Write ``run.json`` only if there is none yet; ``False`` when one already exists.

    Exclusive and whole (:func:`tuidiag.store.safe_write.claim_text`): of two recorders
    starting in the same directory at once exactly one claims it, a reader never sees a
    half-written manifest, and a symlink planted at either name is never followed.
    Other ``OSError`` (read-only, disk full) are raised.
    """
    return claim_text(run_dir / MANIFEST_NAME, json.dumps(manifest, indent=1, allow_nan=False))


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """Read ``run.json``; raises ``OSError`` or ``ValueError`` when missing or malformed.

    Over :data:`~tuidiag.store.limits.MAX_MANIFEST_BYTES` or nested deeper than
    :data:`~tuidiag.store.limits.MAX_JSON_DEPTH` it is not parsed (``LimitError``, a ``ValueError``);
    a FIFO or directory in its place is refused without blocking.
    """
    manifest = read_json_bounded(run_dir / MANIFEST_NAME, MAX_MANIFEST_BYTES)
    if not isinstance(manifest, dict):
        raise ValueError("run.json does not hold a JSON object")
    return manifest


def effective_status(manifest: dict[str, Any], now: float | None = None) -> str:
    """The status a reader should show: ``crashed`` for a running run that stopped beating."""
    status = str(manifest.get("status", STATUS_RUNNING))
    if status != STATUS_RUNNING:
        return status
    if _pid_dead_here(manifest):
        return STATUS_CRASHED
    heartbeat = manifest.get("heartbeat")
    if not isinstance(heartbeat, (int, float)):
        return status
    flush = manifest.get("flush_interval")
    flush = float(flush) if isinstance(flush, (int, float)) else 1.0
    stale_after = max(STALE_AFTER_MIN_SECONDS, 10 * flush)
    age = (time.time() if now is None else now) - heartbeat
    return STATUS_CRASHED if age > stale_after else status


def _pid_dead_here(manifest: dict[str, Any]) -> bool:
    """True when the writing process ran on this host and no longer exists."""
    return process_gone(manifest.get("host"), manifest.get("pid"))


def process_gone(host: object, pid: object) -> bool:
    """True when process ``pid`` of host ``host`` is this host's and no longer exists (or is a zombie);
    False when it exists, or when that cannot be told (another host, no pid)."""
    if host != socket.gethostname() or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError, OverflowError):  # a pid beyond the C range: not one to check
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed child not yet reaped by its parent still 'exists'; /proc tells."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"
