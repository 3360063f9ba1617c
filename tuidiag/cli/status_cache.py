"""The top finding for ``tuidiag status``, cached so a status bar polling every few seconds stays cheap.

A diagnosis reads the whole run; on a large run that takes seconds. The cache
(``$TUIDIAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/tuidiag``, else ``~/.cache/tuidiag``)
keeps the last top finding with the run's *signature* (the newest flush of each
rank and table, and the names of its job results: a new result changes the diagnosis).
A small run never diagnosed before is diagnosed inline. When the signature changed, the run is re-diagnosed in a detached ``tuidiag status --refresh-cache`` process (tuidiag's own
code, isolated from the working directory: :mod:`tuidiag.self_command`; one at a
time, guarded by a lock file, at most every ``max(MIN_INTERVAL, COST_FACTOR x its
cost)`` seconds), while the status line shows the previous finding marked stale.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

from tuidiag import self_command
from tuidiag.format import EVENTS_DIR, METRICS_DIR
from tuidiag.store.cache_dir import cache_root, run_key
from tuidiag.store.safe_write import create_new, write_text_atomic
from tuidiag.store.limits import MAX_STATUS_CACHE_BYTES, read_json_bounded
from tuidiag.store.discovery import Shards, list_shards
from tuidiag.store.job_results import results_mark

INLINE_BYTES = 4 * 1024 * 1024
"""Runs whose metric shards total less than this are diagnosed inline (a fraction of a second) the first time;
afterwards in the background, so a status bar polling a live run every second costs milliseconds per call."""
MIN_INTERVAL = 10.0
COST_FACTOR = 10.0
BACKGROUND_NICE = 10
LOCK_STALE = 600.0
"""A lock older than this is from a refresher that died."""


def cache_dir() -> Path:
    """Where cached findings live."""
    return cache_root() / "status"


def _entry(run_dir: Path) -> Path:
    return cache_dir() / f"{run_key(run_dir)}.json"


def signature(run_dir: Path, metrics: Shards | None = None) -> tuple[str, int]:
    """(the newest flush of each table and rank and the job results saved, total metric shard bytes): changes
    whenever data arrives or a job saves a result (the diagnosis reads both). ``metrics``: the shards of
    ``metrics/`` when the caller has listed them already (``tuidiag status`` lists them once per call)."""
    parts, size = [], 0
    for table in (METRICS_DIR, EVENTS_DIR):
        newest: dict[int, int] = {}
        listed = metrics if table == METRICS_DIR and metrics is not None else list_shards(run_dir / table)
        for shard, path in listed:
            newest[shard.rank] = max(newest.get(shard.rank, -1), shard.last)
            if table == METRICS_DIR:
                try:
                    size += path.stat().st_size
                except OSError:
                    continue
        parts.append(",".join(f"r{r}:{s}" for r, s in sorted(newest.items())))
    jobs = results_mark(run_dir)
    if jobs:  # a run without job results keeps the signature older entries were stored with
        parts.append(f"j{len(jobs)}:{zlib.crc32(chr(0).join(jobs).encode('utf-8', 'surrogateescape')):08x}")
    return "/".join(parts), size


def load(run_dir: Path) -> dict[str, Any] | None:
    """The cached entry of ``run_dir``, or ``None``."""
    try:
        entry = read_json_bounded(_entry(run_dir), MAX_STATUS_CACHE_BYTES)
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def refresh(run_dir: Path, sig: str | None = None) -> dict[str, Any]:
    """Diagnose ``run_dir`` now and cache its top finding; returns the cache entry (``sig``: its signature, when
    the caller has just taken it)."""
    from tuidiag.diagnosis import diagnose
    from tuidiag.store import open_run
    from tuidiag.store.job_results import job_records

    if sig is None:
        sig, _ = signature(run_dir)  # taken first: data arriving meanwhile makes the entry stale, not wrong
    start = time.perf_counter()
    run = open_run(run_dir)
    diagnosis = diagnose(run, jobs=job_records(run))
    return store(run_dir, sig, diagnosis, time.perf_counter() - start, run.warnings)


def store(run_dir: Path, sig: str, diagnosis: Any, cost: float, warnings: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """Cache ``diagnosis`` (a :class:`~tuidiag.diagnosis.Diagnosis` of the run's files as of signature ``sig``,
    which took ``cost`` seconds; ``warnings``: what the read could not read); returns the cache entry.
    The monitor stores the diagnoses it computes here too."""
    top = diagnosis.top
    entry = {
        "path": str(run_dir.resolve()),
        "signature": sig,
        "computed": time.time(),
        "cost": cost,
        "step": diagnosis.step,
        "top": top_entry(top),
        "warnings": [str(w)[:500] for w in warnings[:20]],
    }
    whole = diagnosis.to_json()
    if len(json.dumps(whole, default=str)) < MAX_STATUS_CACHE_BYTES // 2:  # the run view shows it; too large: top only
        entry["diagnosis"] = whole
    try:
        _write(_entry(run_dir), entry)
    except OSError:
        pass  # an unwritable cache only costs speed: the next call diagnoses again
    return entry


def top_entry(top: Any) -> dict[str, Any]:
    """A finding as the status line keeps it: its code, its name as every other view shows it (``badge``: the one
    place codes get their short titles, :func:`tuidiag.diagnosis.codes.badge`), title, confidence and severity."""
    from tuidiag.diagnosis.codes import badge  # the diagnosis is loaded already: this costs nothing

    return {"code": top.code, "badge": badge(top.code), "title": top.title, "confidence": top.confidence,
            "severity": top.severity}


def due(cached: dict[str, Any] | None) -> bool:
    """True when a stale entry may be refreshed in the background now: none yet, or the last is older than
    ``max(MIN_INTERVAL, COST_FACTOR x its cost)`` seconds."""
    if cached is None:
        return True
    try:
        computed, cost = float(cached.get("computed", 0)), float(cached.get("cost", 0))
    except (TypeError, ValueError):
        return True
    return time.time() - computed > max(MIN_INTERVAL, COST_FACTOR * cost)


def _write(path: Path, entry: dict[str, Any]) -> None:
    """Write a cache entry atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(entry), mode=0o600)


def top_finding(run_dir: Path, inline: bool = False, metrics: Shards | None = None) -> tuple[dict[str, Any] | None, bool]:
    """(the top finding, whether it covers the newest data); refreshes inline or in the background as needed
    (``metrics``: the shards of ``metrics/``, already listed)."""
    sig, size = signature(run_dir, metrics)
    cached = load(run_dir)
    if cached is not None and cached.get("signature") == sig and "badge" in (cached.get("top") or {}):
        return cached.get("top"), True  # an entry without a badge predates it: diagnosed again, as a stale one
    if inline or (cached is None and size < INLINE_BYTES):
        return refresh(run_dir, sig)["top"], True
    if due(cached):
        start_background(run_dir)
    return (cached or {}).get("top"), False


def _lock(run_dir: Path) -> Path:
    return _entry(run_dir).with_suffix(".lock")


def start_background(run_dir: Path) -> bool:
    """Start a detached refresher unless one is running; True when one was started."""
    lock = _lock(run_dir)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        if lock.exists() and time.time() - lock.stat().st_mtime > LOCK_STALE:
            lock.unlink(missing_ok=True)
        create_new(lock)
    except OSError:  # held by a running refresher (FileExistsError), or an unwritable cache
        return False
    subprocess.Popen(
        self_command.command("status", str(run_dir), "--refresh-cache"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return True


def refresh_locked(run_dir: Path) -> None:
    """The background refresher's body: refresh, then release the lock taken by :func:`start_background`.
    It yields the CPU to what started it (a status bar, the monitor drawing its first frame): ``nice`` 10."""
    try:
        os.nice(BACKGROUND_NICE)
    except (OSError, AttributeError):  # not permitted, or not POSIX: at the usual priority
        pass
    try:
        refresh(run_dir)
    finally:
        _lock(run_dir).unlink(missing_ok=True)


def diagnosis_of(entry: dict[str, Any]) -> Any:
    """The :class:`~tuidiag.diagnosis.Diagnosis` kept in a cache entry, or ``None`` (none kept, or malformed).
    Findings whose code this version does not know are left out."""
    from tuidiag.diagnosis.finding import Diagnosis, Finding

    whole = entry.get("diagnosis")
    if not isinstance(whole, dict):
        return None

    def findings(key: str) -> list[Finding]:
        found = []
        for item in whole.get(key) or []:
            try:
                found.append(Finding(str(item["code"]), str(item["title"]), float(item["confidence"]), str(item["severity"]),
                                     [str(e) for e in item["evidence"]], str(item["fix"]),
                                     item["first_step"] if isinstance(item.get("first_step"), int) else None,
                                     [str(r) for r in item.get("related") or []]))
            except (KeyError, TypeError, ValueError):
                continue
        return found

    step = whole.get("step")
    result = Diagnosis(str(whole.get("run", "")), step if isinstance(step, int) else None, findings("findings"), findings("notes"),
                       [str(s) for s in whole.get("skipped") or []])
    return result if result.findings else None
