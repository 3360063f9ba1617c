"""``RunsModel``: the runs under a root, refreshed incrementally, summarised and detailed.

Called from worker threads only. Each run is read on its own (:mod:`tuidiag.viewmodel.read_pool`),
under its own lock: a run that raises while it is read (a ``run.json`` nested
too deeply, a shard whose footer claims 10^12 rows) shows as ``unreadable`` with
the reason, and one whose read is slow shows as ``reading`` (or with its last
summary) while the others are listed at once. A failed run is read again when its
files change, or every :data:`RETRY_AFTER` seconds.

Work per refresh is kept to what changed: a run's live diagnosis is recomputed
at once when events arrived, and when only rows arrived at most as often as a
CPU budget allows (``DIAGNOSIS_BUDGET``); the run view's charts are rebuilt only
when its run got new data.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from tuidiag.diagnosis import Diagnosis
from tuidiag.format import LOSS, MANIFEST_NAME, METRICS_DIR
from tuidiag.sources import KIND_TUIDIAG, discover, open_source
from tuidiag.store import Run
from tuidiag.store.manifest import read_manifest
from tuidiag.store.tail_summary import TailSummary, current_summary, read_summary
from tuidiag.store.unreadable import reason_of
from tuidiag.viewmodel.detail import DetailData
from tuidiag.viewmodel.downsample import tail_spark
from tuidiag.viewmodel.read_pool import ReadPool
from tuidiag.viewmodel.run_details import RunDetails
from tuidiag.viewmodel.run_diagnoses import RunDiagnoses
from tuidiag.viewmodel.run_slot import Diagnosed, RunSlot
from tuidiag.viewmodel.snapshot import RunSummary, reading_summary, summarize, summarize_tail, unreadable_summary

RETRY_AFTER = 10.0
"""Seconds before a run whose read failed is read again (at once when its files change)."""
TAIL_GRACE = 3.0
"""Seconds a run's ``run.json`` summary may stay behind its newest metrics shard before the run is read whole. The
recorder writes ``run.json`` just after each flush's shards: a refresh between the two shows the run as of its last
summary, and the rename of ``run.json`` brings the next refresh. Behind for longer (a crash between the two, another
tool's shard), the shards are read, as for a run without a summary."""


class RunsModel(RunDiagnoses, RunDetails):
    """All runs at or below ``root``."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.time, on_late: Callable[[Path], None] | None = None) -> None:
        self.root = root
        self.clock = clock
        self.on_late = on_late
        """Called (on a reading thread) when a run's read ends after the refresh that started it returned."""
        self._slots: dict[Path, RunSlot] = {}
        self._pool = ReadPool()
        self._diagnoses: dict[Path, Diagnosed] = {}
        self._growing: dict[Path, float] = {}
        """When each run last had rows newer than its diagnosis (``time.monotonic()``)."""
        self._details: dict[Path, tuple[tuple[int, int, int | None, int], object, DetailData]] = {}
        self._resolved: dict[Path, Path] = {}
        self._sparks: dict[Path, tuple[object, tuple[float, ...]]] = {}
        self._samples: dict[Path, tuple[int, np.ndarray]] = {}
        """Each run's loss steps (a read-only copy) and the ``rows_read`` they were copied at."""
        self._lock = threading.Lock()
        """Guards ``_slots`` (not the runs: each slot has its own lock)."""
        self._diagnosis_pool = ReadPool(workers=1, top_up=False, name="tuidiag-diagnose")
        """Diagnoses run one at a time, on one thread, after the reads: they never delay a run's row."""
        self._focus: tuple[Path | None, float] = (None, -math.inf)
        """The run whose view was last built, and when (``time.monotonic()``)."""
        self._hold_until = 0.0
        """``time.monotonic()`` before which no diagnosis starts (:meth:`hold_diagnoses`)."""
        self._announcing: threading.Timer | None = None
        self._announced: set[Path] = set()
        """Runs whose summary changed since the last announcement (:meth:`_announce`)."""
        self._closed = False
        """Set by :meth:`close`: queued diagnoses are dropped and nothing more is cached."""
        self._cache_lock = threading.Lock()
        """Held while ``_closed`` is set and while a diagnosis checks it and writes the cache (:meth:`_store`)."""

    @property
    def runs(self) -> dict[Path, Run]:
        """The runs read at least once, by path."""
        with self._lock:
            return {path: slot.run for path, slot in self._slots.items() if slot.run is not None}

    def discover(self) -> list[Path]:
        """Note run directories that appeared since the last call (they are read at the next refresh)."""
        found = discover(self.root)
        with self._lock:
            new = [p for p in found if p not in self._slots]
            for path in new:
                self._slots[path] = RunSlot(path, found[path])
            return new

    def knows(self, dirs: set[Path]) -> bool:
        """True when every one of ``dirs`` is a run already known (no discovery needed)."""
        with self._lock:
            paths = list(self._slots)
        known = set(paths) | {self._resolve(p) for p in paths}
        return all(d in known or d.resolve() in known for d in dirs)

    def refresh(self, dirs: set[Path] | None = None, wait: float = math.inf) -> list[RunSummary]:
        """Read new data of ``dirs`` (default: every run) and return every run's summary.

        Waits up to ``wait`` seconds for the reads; a run still being read then is shown
        with its last summary, or as ``reading``."""
        with self._lock:
            slots = list(self._slots.values())
        now = time.monotonic()
        tasks, read = [], []
        for slot in slots:
            if dirs is not None and slot.path not in dirs and self._resolve(slot.path) not in dirs:
                continue
            read.append(slot)
            if slot.task is not None and not slot.task.done():
                tasks.append(slot.task)  # one read per run at a time
            elif slot.problem is None or dirs is not None or now - slot.failed_at >= RETRY_AFTER:
                slot.queued = now
                slot.task = self._pool.submit(lambda slot=slot, started=now: self._read(slot, started, wait))
                tasks.append(slot.task)
        self._pool.wait(tasks, wait)
        for slot in read:  # diagnoses start once the rows are listed: they never hold up a read
            if slot.task is not None and slot.task.done() and slot.tail is not None and slot.problem is None:
                self._diagnose_later(slot)
        return self.summaries()

    def summaries(self) -> list[RunSummary]:
        """Every run's summary as last read, without reading anything."""
        with self._lock:
            slots = sorted(self._slots.items())
        now = time.monotonic()
        return [self._shown(slot, now) for _, slot in slots]

    def _shown(self, slot: RunSlot, now: float) -> RunSummary:
        name = slot.summary.name if slot.summary is not None else slot.path.name
        if slot.problem is not None:
            return unreadable_summary(str(slot.path), name, slot.problem, slot.kind)
        if slot.summary is None:
            return reading_summary(str(slot.path), name, now - slot.queued, slot.kind)
        return slot.summary

    def _read(self, slot: RunSlot, queued: float, wait: float) -> None:
        """Summarise one run; any exception is kept as its reason (reading thread).

        A run whose ``run.json`` holds a current summary of its newest rows is summarised from
        ``run.json`` alone and diagnosed afterwards (:meth:`_diagnose_later`); any other is read
        whole, and diagnosed, as before."""
        with slot.lock:
            try:
                slot.tail = self._current_tail(slot)
                if slot.tail is not None:
                    slot.summary = summarize_tail(slot.path, slot.manifest, slot.tail, slot.health, self.clock(), slot.warnings)
                else:
                    self._open(slot)
                    slot.summary = self._summary(slot.path, slot.run)
                slot.problem = None
            except Exception as exc:  # MemoryError, RecursionError included: this run only
                slot.problem, slot.failed_at = reason_of(exc), time.monotonic()
        late = time.monotonic() - queued > wait
        if late and slot.tail is not None and slot.problem is None:
            self._diagnose_later(slot)  # its refresh returned before it: queue its diagnosis here
        if self.on_late is not None and late:
            self.on_late(slot.path)

    def _open(self, slot: RunSlot) -> Run:
        """The slot's run read whole, opened now or refreshed (slot lock held)."""
        if slot.run is None:
            slot.run = open_source(slot.path, slot.kind)
        else:
            slot.run.refresh()
        return slot.run

    @staticmethod
    def _current_tail(slot: RunSlot) -> TailSummary | None:
        """The summary in the run's ``run.json`` if it covers the shards on disk (slot lock held); another
        tracker's run has none: it is read whole. When neither ``run.json`` nor the list of metrics shards
        changed since the last call (:func:`_files_mark`), the summary found then is kept: nothing is parsed. A summary
        behind the newest shard is taken for the last one for :data:`TAIL_GRACE` seconds (its ``run.json`` is on its way)."""
        if slot.kind != KIND_TUIDIAG:
            return None
        mark = _files_mark(slot.path)
        if mark is not None and mark == slot.files_mark and slot.tail is not None:
            return slot.tail
        slot.files_mark = None
        try:
            manifest = read_manifest(slot.path)
        except (OSError, ValueError, RecursionError):  # read whole instead: the reader says what is wrong
            return None
        tail = current_summary(slot.path, manifest)
        if tail is not None:
            slot.manifest, slot.files_mark, slot.behind_since = manifest, mark, None
            return tail
        if slot.tail is not None and read_summary(manifest) is not None:  # behind the newest shard
            now = time.monotonic()
            slot.behind_since = now if slot.behind_since is None else slot.behind_since
            if now - slot.behind_since < TAIL_GRACE:
                return slot.tail
        return None

    def _summary(self, path: Path, run: Run, diagnosis: Diagnosis | None = None) -> RunSummary:
        """``summarize`` with the loss sparkline reused while the loss series is unchanged."""
        loss = run.series(LOSS)
        spark = self._sparks.get(path)
        if spark is None or spark[0] is not loss:
            spark = self._sparks[path] = (loss, tuple(tail_spark(loss.values)))
        return summarize(run, self._diagnosis(path, run) if diagnosis is None else diagnosis, self.clock(), spark[1])

    def _resolve(self, path: Path) -> Path:
        resolved = self._resolved.get(path)
        if resolved is None:
            resolved = self._resolved[path] = path.resolve()
        return resolved


def _files_mark(path: Path) -> tuple[int, ...] | None:
    """What changes when ``run.json`` is replaced or written (its inode, size and modification time) or a metrics
    shard is added, renamed or removed (the directory's modification time); ``None`` when either cannot be read."""
    try:
        manifest, metrics = (path / MANIFEST_NAME).stat(), (path / METRICS_DIR).stat()
    except OSError:
        return None
    return (manifest.st_ino, manifest.st_size, manifest.st_mtime_ns, manifest.st_ctime_ns, metrics.st_ino, metrics.st_mtime_ns)
