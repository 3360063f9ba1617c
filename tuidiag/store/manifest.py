"""The run manifest ``run.json``: identity, config, status and heartbeat.

The recorder rewrites the manifest atomically at each flush (its heartbeat), so a
reader can tell a live run from a finished one and from one killed without
``close()``: status ``running`` with a dead pid on this host, or with a heartbeat
much older than the flush interval, reads as crashed.
"""

from __future__ import annotations

import json
import os
import socket
import stat
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
        "command": list(sys.argv),
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


def _uid() -> int | None:
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid else None


def library_versions() -> dict[str, str]:
    """Versions of Python and of the libraries a run's numbers depend on."""
    from importlib import metadata

    versions = {"python": sys.version.split()[0]}
    for package in ("tuidiag", "torch", "numpy", "pyarrow"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def jsonable(value: Any) -> Any:
    """Turn a config value into something ``json.dumps`` accepts, losing no information silently.

    Never raises: cycles, deep nesting and objects whose ``repr`` fails become placeholders
    (:func:`tuidiag.store.json_values.to_json`)."""
    from tuidiag.store.json_values import to_json

    return to_json(value).value


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write ``run.json`` atomically (temporary file, then rename)."""
    path = run_dir / MANIFEST_NAME
    tmp = run_dir / f".{MANIFEST_NAME}.{os.getpid()}.partial"
    try:
        tmp.write_text(json.dumps(manifest, indent=1, allow_nan=False), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def claim_manifest(run_dir: Path, manifest: dict[str, Any]) -> bool:
    """Write ``run.json`` only if there is none yet; ``False`` when one already exists.

    Exclusive and whole: the manifest is written under a temporary name and
    hard-linked into place (a link never replaces a file), so of two recorders
    starting in the same directory at once exactly one claims it, and a reader never
    sees a half-written manifest. Where hard links are not supported, an exclusive
    create is used instead. Other ``OSError`` (read-only, disk full) are raised.
    """
    path = run_dir / MANIFEST_NAME
    text = json.dumps(manifest, indent=1, allow_nan=False)
    tmp = run_dir / f".{MANIFEST_NAME}.{os.getpid()}.claim.partial"
    try:
        tmp.write_text(text, encoding="utf-8")
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError:  # no hard links here (some network or FAT filesystems)
            pass
    finally:
        tmp.unlink(missing_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """Read ``run.json``; raises ``OSError`` or ``ValueError`` when missing or malformed."""
    path = run_dir / MANIFEST_NAME
    if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block the reader forever
        raise ValueError("run.json is not a regular file")
    text = path.read_text(encoding="utf-8")
    manifest = json.loads(text)
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
    pid = manifest.get("pid")
    if manifest.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
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
