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
from dataclasses import dataclass, field, replace
from typing import Callable
from pathlib import Path

import numpy as np

from tuidiag.diagnosis import Diagnosis, diagnose
from tuidiag.format import LOSS
from tuidiag.viewmodel.compare_view import CompareView, compare_view, run_compared
from tuidiag.viewmodel.detail import DetailData, build_detail, detail_data
from tuidiag.viewmodel.downsample import tail_spark
from tuidiag.viewmodel.read_pool import ReadPool, ReadTask
from tuidiag.viewmodel.snapshot import RunDetail, RunSummary, reading_summary, summarize, unreadable_summary
from tuidiag.sources import KIND_TUIDIAG, discover, open_source
from tuidiag.store import Run
from tuidiag.store.job_results import job_records
from tuidiag.store.unreadable import reason_of


DIAGNOSIS_BUDGET = 0.02
"""Share of one core that re-diagnosing runs which only got new rows may take."""
DIAGNOSIS_MAX_AGE = 30.0
"""The live diagnosis of a growing run is never older than this (seconds, plus one refresh)."""
RETRY_AFTER = 10.0
"""Seconds before a run whose read failed is read again (at once when its files change)."""


@dataclass
class _Diagnosed:
    rows: int
    events: int
    diagnosis: Diagnosis
    at: float
    """``time.monotonic()`` when computed."""
    cost: float
    """CPU seconds it took."""


@dataclass
class _Slot:
    """One run directory: its reader, its last summary, and why its last read failed."""

    path: Path
    kind: str = KIND_TUIDIAG
    """The kind of run it was found as (:mod:`tuidiag.sources.registry`): how it is opened."""
    run: Run | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while the run is read or its view is built: nothing else touches ``run`` then."""
    task: ReadTask | None = None
    queued: float = 0.0
    """``time.monotonic()`` when ``task`` was queued."""
    summary: RunSummary | None = None
    problem: str | None = None
    """Why the last read raised (``None``: it did not)."""
    failed_at: float = -math.inf


class RunsModel:
    """All runs at or below ``root``."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.time, on_late: Callable[[Path], None] | None = None) -> None:
        self.root = root
        self.clock = clock
        self.on_late = on_late
        """Called (on a reading thread) when a run's read ends after the refresh that started it returned."""
        self._slots: dict[Path, _Slot] = {}
        self._pool = ReadPool()
        self._diagnoses: dict[Path, _Diagnosed] = {}
        self._growing: dict[Path, float] = {}
        """When each run last had rows newer than its diagnosis (``time.monotonic()``)."""
        self._details: dict[Path, tuple[tuple[int, int, int | None, int], object, DetailData]] = {}
        self._resolved: dict[Path, Path] = {}
        self._sparks: dict[Path, tuple[object, tuple[float, ...]]] = {}
        self._samples: dict[Path, tuple[int, np.ndarray]] = {}
        """Each run's loss steps (a read-only copy) and the ``rows_read`` they were copied at."""
        self._lock = threading.Lock()
        """Guards ``_slots`` (not the runs: each slot has its own lock)."""

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
                self._slots[path] = _Slot(path, found[path])
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
        tasks = []
        for slot in slots:
            if dirs is not None and slot.path not in dirs and self._resolve(slot.path) not in dirs:
                continue
            if slot.task is not None and not slot.task.done():
                tasks.append(slot.task)  # one read per run at a time
            elif slot.problem is None or dirs is not None or now - slot.failed_at >= RETRY_AFTER:
                slot.queued = now
                slot.task = self._pool.submit(lambda slot=slot, started=now: self._read(slot, started, wait))
                tasks.append(slot.task)
        self._pool.wait(tasks, wait)
        return self.summaries()

    def summaries(self) -> list[RunSummary]:
        """Every run's summary as last read, without reading anything."""
        with self._lock:
            slots = sorted(self._slots.items())
        now = time.monotonic()
        return [self._shown(slot, now) for _, slot in slots]

    def _shown(self, slot: _Slot, now: float) -> RunSummary:
        name = slot.summary.name if slot.summary is not None else slot.path.name
        if slot.problem is not None:
            return unreadable_summary(str(slot.path), name, slot.problem, slot.kind)
        if slot.summary is None:
            return reading_summary(str(slot.path), name, now - slot.queued, slot.kind)
        return slot.summary

    def _read(self, slot: _Slot, queued: float, wait: float) -> None:
        """Open or refresh one run and summarise it; any exception is kept as its reason (reading thread)."""
        with slot.lock:
            try:
                if slot.run is None:
                    slot.run = open_source(slot.path, slot.kind)
                else:
                    slot.run.refresh()
                slot.summary = self._summary(slot.path, slot.run)
                slot.problem = None
            except Exception as exc:  # MemoryError, RecursionError included: this run only
                slot.problem, slot.failed_at = reason_of(exc), time.monotonic()
        if self.on_late is not None and time.monotonic() - queued > wait:
            self.on_late(slot.path)

    def detail(self, key: str, at: int | None = None, points: int = 400, wait: float | None = None) -> RunDetail | None:
        """The run view's data for run ``key`` as of step ``at``; ``None`` when the run is not
        read yet, is unreadable, or is still being read after ``wait`` seconds (default: no limit)."""
        with self._lock:
            slot = self._slots.get(Path(key))
        if slot is None or not slot.lock.acquire(timeout=-1 if wait is None else wait):
            return None
        try:
            run = slot.run
            if run is None or slot.problem is not None:
                return None
            path = slot.path
            live = self._diagnosis(path, run)
            diagnosis = live if at is None else diagnose(run, at=at, jobs=job_records(run))
            stamp = (run.rows_read, len(run.events), at, points)
            model = run.manifest.get("model")
            cached = self._details.get(path)
            if cached is None or cached[0] != stamp or cached[1] != model:
                cached = self._details[path] = (stamp, model, detail_data(run, at, points))
            detail = build_detail(run, self._summary(path, run, live), diagnosis, at, points, live, cached[2])
            if at is None and run.status == "running":  # live: the steps change at every flush, and only replay uses them
                return detail
            return replace(detail, samples=self._loss_steps(path, run))
        except Exception:  # a run whose data breaks the view: the overview still says what it can
            return None
        finally:
            slot.lock.release()

    def _summary(self, path: Path, run: Run, diagnosis: Diagnosis | None = None) -> RunSummary:
        """``summarize`` with the loss sparkline reused while the loss series is unchanged."""
        loss = run.series(LOSS)
        spark = self._sparks.get(path)
        if spark is None or spark[0] is not loss:
            spark = self._sparks[path] = (loss, tuple(tail_spark(loss.values)))
        return summarize(run, self._diagnosis(path, run) if diagnosis is None else diagnosis, self.clock(), spark[1])

    def _loss_steps(self, path: Path, run: Run) -> np.ndarray:
        """The steps of ``run``'s loss, copied once per change of its data (the UI never sees the run's arrays)."""
        kept = self._samples.get(path)
        if kept is None or kept[0] != run.rows_read:
            steps = np.array(run.series(LOSS).steps, dtype=np.int64)
            steps.flags.writeable = False
            kept = self._samples[path] = (run.rows_read, steps)
        return kept[1]

    def _resolve(self, path: Path) -> Path:
        resolved = self._resolved.get(path)
        if resolved is None:
            resolved = self._resolved[path] = path.resolve()
        return resolved

    def _diagnosis(self, path: Path, run: Run) -> Diagnosis:
        """The live diagnosis of ``run``: recomputed at once when events arrived; when only
        rows did, once the last one is older than :meth:`_rediagnose_after` seconds."""
        rows, events = run.rows_read, len(run.events)
        cached = self._diagnoses.get(path)
        now = time.monotonic()
        if cached is not None and cached.events == events:
            if cached.rows == rows:
                return cached.diagnosis
            self._growing[path] = now
            if now - cached.at < self._rediagnose_after(now):
                return cached.diagnosis
        start = time.thread_time()
        diagnosis = diagnose(run, jobs=job_records(run))
        self._diagnoses[path] = _Diagnosed(rows, events, diagnosis, now, time.thread_time() - start)
        return diagnosis

    def _rediagnose_after(self, now: float) -> float:
        """Seconds between diagnoses of a growing run: all growing runs' diagnoses within budget."""
        diagnosed = dict(self._diagnoses)  # copies: other runs are diagnosed on other threads
        cost = sum(diagnosed[p].cost for p, t in list(self._growing.items()) if now - t < DIAGNOSIS_MAX_AGE and p in diagnosed)
        return min(DIAGNOSIS_MAX_AGE, cost / DIAGNOSIS_BUDGET)

    def compare(self, keys: tuple[str, ...], points: int = 300) -> CompareView:
        """Loss, validation loss and gradient norm of several runs on shared charts, by step, and the
        first run (A, before) compared with each later one as ``tuidiag compare`` does."""
        with self._lock:
            slots = [slot for key in keys if (slot := self._slots.get(Path(key))) is not None]
        runs = []
        for slot in slots:
            with slot.lock:  # each run read whole while no refresh touches it
                if slot.run is not None and slot.problem is None:
                    runs.append(run_compared(str(slot.path), slot.run, self._diagnosis(slot.path, slot.run), points))
        return compare_view(keys, runs)
