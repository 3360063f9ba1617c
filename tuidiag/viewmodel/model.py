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
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tuidiag.diagnosis import Diagnosis, diagnose
from tuidiag.format import LOSS
from tuidiag.viewmodel.compare_view import CompareView, compare_view, run_compared
from tuidiag.viewmodel.detail import DetailData, build_detail, detail_data
from tuidiag.viewmodel.downsample import tail_spark
from tuidiag.viewmodel.read_pool import ReadPool, ReadTask
from tuidiag.viewmodel.snapshot import PENDING, Health, RunDetail, RunSummary, reading_summary, summarize, summarize_tail, unreadable_summary
from tuidiag.cli import status_cache
from tuidiag.format import EVENTS_DIR, STATUS_RUNNING
from tuidiag.sources import KIND_TUIDIAG, discover, open_source
from tuidiag.store import Run
from tuidiag.store.discovery import list_shards
from tuidiag.store.job_results import job_records
from tuidiag.store.manifest import effective_status, read_manifest
from tuidiag.store.envelope_run import EnvelopeRun, open_envelopes
from tuidiag.store.tail_summary import TailSummary, current_summary
from tuidiag.viewmodel.envelope_view import Window, envelope_detail_data
from tuidiag.store.unreadable import reason_of


DIAGNOSIS_BUDGET = 0.02
"""Share of one core that re-diagnosing runs which only got new rows may take."""
DIAGNOSIS_MAX_AGE = 30.0
"""The live diagnosis of the growing run whose view is open is never older than this (seconds, plus one refresh)."""
BADGE_MAX_AGE = 300.0
"""The health badge of another growing run is never older than this: with many live runs the CPU budget spaces
their diagnoses out (an event, a NaN's included, is diagnosed at once)."""
RETRY_AFTER = 10.0
"""Seconds before a run whose read failed is read again (at once when its files change)."""
SMALL_RUN_ROWS = 500_000
"""Runs with at most this many rows are diagnosed in the monitor (read whole, and tailed while they run);
larger ones in a separate process, whose finding the diagnosis cache hands back."""
ROWS_POINTS = 400
"""Points per chart line of a run read whole (older writers, several ranks, a replay); runs drawn from
envelopes get one min/max bucket per cell of the chart's width."""
ANNOUNCE_AFTER = 0.25
"""Seconds over which diagnoses that finish after their refresh are announced to the app together."""


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
    manifest: dict[str, Any] = field(default_factory=dict)
    tail: TailSummary | None = None
    """The recorder's summary of the newest rows, when ``run.json`` has a current one: the overview row comes
    from it and the manifest alone (``None``: a run of an older writer, read whole as before)."""
    health: Health = PENDING
    warnings: tuple[str, ...] = ()
    """What the last whole read of the run (for its diagnosis, here or in the cache's process) could not read."""
    diagnosed: tuple[int, int] | None = None
    """(``tail.seq``, ``tail.rows``) that ``health`` covers."""
    diagnosing: ReadTask | None = None
    events_mark: tuple[tuple[int, int], ...] = ()
    """The newest events shards when the run was last diagnosed: an event is diagnosed at once."""
    want_whole: bool = False
    """The run view wants the whole diagnosis, not only the badge a cache entry may hold."""
    envelopes: EnvelopeRun | None = None
    """The run's envelopes, while its view is drawn from them (:meth:`RunsModel.detail`)."""


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
        self._diagnosis_pool = ReadPool(workers=1, top_up=False)
        """Diagnoses run one at a time, on one thread, after the reads: they never delay a run's row."""
        self._focus: tuple[Path | None, float] = (None, -math.inf)
        """The run whose view was last built, and when (``time.monotonic()``)."""
        self._hold_until = 0.0
        """``time.monotonic()`` before which no diagnosis starts (:meth:`hold_diagnoses`)."""
        self._announcing: threading.Timer | None = None
        self._closed = False
        """Set by :meth:`close`: queued diagnoses are dropped and nothing more is cached."""

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

    def _shown(self, slot: _Slot, now: float) -> RunSummary:
        name = slot.summary.name if slot.summary is not None else slot.path.name
        if slot.problem is not None:
            return unreadable_summary(str(slot.path), name, slot.problem, slot.kind)
        if slot.summary is None:
            return reading_summary(str(slot.path), name, now - slot.queued, slot.kind)
        return slot.summary

    def _read(self, slot: _Slot, queued: float, wait: float) -> None:
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

    def _open(self, slot: _Slot) -> Run:
        """The slot's run read whole, opened now or refreshed (slot lock held)."""
        if slot.run is None:
            slot.run = open_source(slot.path, slot.kind)
        else:
            slot.run.refresh()
        return slot.run

    @staticmethod
    def _current_tail(slot: _Slot) -> TailSummary | None:
        """The summary in the run's ``run.json`` if it covers the shards on disk (slot lock held); another
        tracker's run has none: it is read whole."""
        if slot.kind != KIND_TUIDIAG:
            return None
        try:
            manifest = read_manifest(slot.path)
        except (OSError, ValueError, RecursionError):  # read whole instead: the reader says what is wrong
            return None
        tail = current_summary(slot.path, manifest)
        if tail is not None:
            slot.manifest = manifest
        return tail

    def _diagnose_later(self, slot: _Slot) -> None:
        """Queue the diagnosis of a run summarised from ``run.json``, unless it covers the newest rows already."""
        tail = slot.tail
        if tail is None or slot.diagnosed == (tail.seq, tail.rows) or (slot.diagnosing is not None and not slot.diagnosing.done()):
            return
        slot.diagnosing = self._diagnosis_pool.submit(lambda: self._diagnose(slot))

    def close(self) -> None:
        """The monitor is closing: diagnoses still queued start no read and write no cache entry (their thread
        outlives the app, and the environment that named the cache directory may be gone)."""
        self._closed = True

    def hold_diagnoses(self, seconds: float) -> None:
        """Start no diagnosis for ``seconds``: a diagnosis holds the interpreter for most of its time, and the
        monitor's first draw of a long list of runs would share it."""
        self._hold_until = time.monotonic() + seconds

    def _diagnose(self, slot: _Slot) -> None:
        """The health of a run summarised from ``run.json`` (diagnosis thread): from the diagnosis cache
        when it covers the run's files; else diagnosed here when the run is small (read whole, then tailed
        while it runs), and in a ``tuidiag status --refresh-cache`` process when it is large, so this
        process never holds a large run in memory. The result is cached for the status line and the next start."""
        time.sleep(max(0.0, self._hold_until - time.monotonic()))
        if self._closed or self._not_due(slot):
            return
        with slot.lock:
            tail = slot.tail
            if tail is None or slot.problem is not None:
                return
            shown, computed = (slot.health, slot.warnings), self._diagnoses.get(slot.path)
            try:
                signature, _ = status_cache.signature(slot.path)
                cached = status_cache.load(slot.path)
                whole_kept = not slot.want_whole or (cached is not None and status_cache.diagnosis_of(cached) is not None)
                if slot.run is None and cached is not None and cached.get("signature") == signature and whole_kept:
                    slot.health, slot.diagnosed = _cached_health(cached), (tail.seq, tail.rows)
                    slot.warnings = _cached_warnings(cached)
                elif slot.run is None and tail.rows > SMALL_RUN_ROWS:
                    if cached is not None:
                        slot.health, slot.warnings = _cached_health(cached), _cached_warnings(cached)
                    if status_cache.due(cached):
                        status_cache.start_background(slot.path)
                else:
                    run = self._open(slot)
                    diagnosis = self._diagnosis(slot.path, run)
                    top = diagnosis.top
                    slot.health = Health(top.code, top.title, top.severity, top.confidence)
                    slot.warnings = tuple(run.warnings)
                    if self._diagnoses[slot.path].rows == run.rows_read and not self._closed:  # not one kept from before
                        slot.diagnosed = (tail.seq, tail.rows)
                        status_cache.store(slot.path, signature, diagnosis, self._diagnoses[slot.path].cost, run.warnings)
                    if effective_status(slot.manifest) != STATUS_RUNNING:
                        slot.run = None  # a finished run is not tailed: its rows need not stay in memory
                slot.summary = summarize_tail(slot.path, slot.manifest, tail, slot.health, self.clock(), slot.warnings)
            except Exception:  # a diagnosis that fails leaves the row as it was; the run view says why
                slot.diagnosed = (tail.seq, tail.rows)
            changed = (slot.health, slot.warnings) != shown or (slot.want_whole and self._diagnoses.get(slot.path) is not computed)
        if changed:  # a new badge, or the whole diagnosis the run view waits for: the app draws it
            self._announce()

    def _not_due(self, slot: _Slot) -> bool:
        """True when a run tailed here was diagnosed so recently that the CPU budget puts off the next diagnosis
        (no event arrived since): nothing is read until then."""
        computed = self._diagnoses.get(slot.path)
        if slot.run is None or computed is None:
            return False
        mark = tuple((shard.rank, shard.last) for shard, _ in list_shards(slot.path / EVENTS_DIR))[-8:]
        if mark != slot.events_mark:
            slot.events_mark = mark
            return False
        now = time.monotonic()
        if now - computed.at < self._rediagnose_after(now, slot.path):
            self._growing[slot.path] = now
            return True
        return False

    def _announce(self) -> None:
        """Tell the app that summaries changed after their refresh returned: at most once per :data:`ANNOUNCE_AFTER`."""
        if self.on_late is None:
            return
        with self._lock:
            if self._announcing is not None:
                return
            self._announcing = threading.Timer(ANNOUNCE_AFTER, self._announce_now)
            self._announcing.daemon = True
            self._announcing.start()

    def _announce_now(self) -> None:
        with self._lock:
            self._announcing = None
        if self.on_late is not None:
            self.on_late(self.root)

    def detail(self, key: str, at: int | None = None, points: int = 400, wait: float | None = None,
               window: Window | None = None) -> RunDetail | None:
        """The run view's data for run ``key`` as of step ``at``; ``None`` when the run is not
        read yet, is unreadable, or is still being read after ``wait`` seconds (default: no limit).

        A run summarised from ``run.json`` is drawn from its envelopes (``window``: the steps a zoom
        shows), its rows never held here; others, and replays (``at``), from all their rows."""
        with self._lock:
            slot = self._slots.get(Path(key))
        if slot is None or not slot.lock.acquire(timeout=-1 if wait is None else wait):
            return None
        self._focus = (slot.path, time.monotonic())
        try:
            if slot.problem is not None or (slot.run is None and slot.summary is None):
                return None
            if at is None and slot.tail is not None and slot.summary is not None:
                shown = self._envelope_detail(slot, points, window)
                if shown is not None:
                    return shown
            run = self._open(slot) if slot.tail is not None or slot.run is None else slot.run
            path = slot.path
            live = self._diagnosis(path, run)
            diagnosis = live if at is None else diagnose(run, at=at, jobs=job_records(run))
            points = ROWS_POINTS  # runs read whole keep their downsampling (MinMaxLTTB) at a fixed size
            stamp = (run.rows_read, len(run.events), at, points, window)
            model = run.manifest.get("model")
            cached = self._details.get(path)
            if cached is None or cached[0] != stamp or cached[1] != model:
                cached = self._details[path] = (stamp, model, detail_data(run, at, points, window))
            detail = build_detail(run, self._summary(path, run, live), diagnosis, at, points, live, cached[2])
            if at is None and run.status == "running":  # live: the steps change at every flush, and only replay uses them
                return detail
            return replace(detail, samples=self._loss_steps(path, run))
        except Exception:  # a run whose data breaks the view: the overview still says what it can
            return None
        finally:
            slot.lock.release()

    def _envelope_detail(self, slot: _Slot, points: int, window: Window | None) -> RunDetail | None:
        """The run view from the run's envelopes (slot lock held); ``None`` for a run they cannot show as the
        rows would: several ranks, or a later session that replaced steps (those are read whole)."""
        envelopes = slot.envelopes
        if envelopes is None:
            envelopes = slot.envelopes = open_envelopes(slot.path)
        else:
            envelopes.refresh()
        if len(envelopes.ranks) > 1 or envelopes.resume_steps:
            slot.envelopes = None
            return None
        diagnosis = self._full_diagnosis(slot)
        summary = slot.summary
        pace = summary.steps_per_s if summary is not None else None  # the overview's steps/s: one figure, one definition
        stamp = (envelopes.rows_read, len(envelopes.events), window, points, pace)
        model = envelopes.manifest.get("model")
        cached = self._details.get(slot.path)
        if cached is None or cached[0] != stamp or cached[1] != model:
            cached = self._details[slot.path] = (stamp, model, envelope_detail_data(envelopes, points, window, pace))
        if summary is not None and summary.health != slot.health.code:
            summary = summarize_tail(slot.path, slot.manifest, slot.tail, slot.health, self.clock(), slot.warnings) if slot.tail else summary
        return build_detail(envelopes, summary, diagnosis, None, points, diagnosis, cached[2])

    def _full_diagnosis(self, slot: _Slot) -> Diagnosis:
        """The whole diagnosis of a run drawn from its envelopes (slot lock held), never computed here: the newest
        one computed on the diagnosis thread (small runs) or kept in the diagnosis cache (large ones, diagnosed in
        their own process); when there is none yet, one is asked for and a note says so (the view is drawn again
        when it is done)."""
        computed = self._diagnoses.get(slot.path)
        if computed is not None:
            return computed.diagnosis
        cached = status_cache.load(slot.path)
        found = status_cache.diagnosis_of(cached) if cached is not None else None
        if found is not None:
            return found
        slot.want_whole = True
        slot.diagnosed = None
        self._diagnose_later(slot)
        tail = slot.tail
        name = slot.summary.name if slot.summary is not None else slot.path.name
        return Diagnosis(name, None, [], [], [f"diagnosing the whole run ({tail.rows if tail else 0:,} rows) in the background; "
                                            "the findings show here when it is done"])

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
            if now - cached.at < self._rediagnose_after(now, path):
                return cached.diagnosis
        start = time.thread_time()
        diagnosis = diagnose(run, jobs=job_records(run))
        self._diagnoses[path] = _Diagnosed(rows, events, diagnosis, now, time.thread_time() - start)
        return diagnosis

    def _rediagnose_after(self, now: float, path: Path | None = None) -> float:
        """Seconds between diagnoses of a growing run: all growing runs' diagnoses within budget; the run whose
        view is open is never left more than :data:`DIAGNOSIS_MAX_AGE` behind, the others :data:`BADGE_MAX_AGE`."""
        diagnosed = dict(self._diagnoses)  # copies: other runs are diagnosed on other threads
        cost = sum(diagnosed[p].cost for p, t in list(self._growing.items()) if now - t < DIAGNOSIS_MAX_AGE and p in diagnosed)
        shown = path is not None and path == self._focus[0] and now - self._focus[1] < DIAGNOSIS_MAX_AGE
        return min(DIAGNOSIS_MAX_AGE if shown else BADGE_MAX_AGE, cost / DIAGNOSIS_BUDGET)

    def compare(self, keys: tuple[str, ...], points: int = 300) -> CompareView:
        """Loss, validation loss and gradient norm of several runs on shared charts, by step, and the
        first run (A, before) compared with each later one as ``tuidiag compare`` does."""
        with self._lock:
            slots = [slot for key in keys if (slot := self._slots.get(Path(key))) is not None]
        runs = []
        for slot in slots:
            with slot.lock:  # each run read whole while no refresh touches it
                if slot.problem is None and (slot.run is not None or slot.summary is not None):
                    run = self._open(slot) if slot.tail is not None or slot.run is None else slot.run
                    runs.append(run_compared(str(slot.path), run, self._diagnosis(slot.path, run), points))
        return compare_view(keys, runs)


def _cached_health(entry: dict[str, Any]) -> Health:
    """The badge of a diagnosis cache entry (``PENDING`` when its top finding is malformed)."""
    top = entry.get("top")
    if not isinstance(top, dict) or not isinstance(top.get("code"), str):
        return PENDING
    confidence = top.get("confidence")
    return Health(top["code"], str(top.get("title", "")), str(top.get("severity", "info")),
                  float(confidence) if isinstance(confidence, (int, float)) and math.isfinite(confidence) else 0.0)


def _cached_warnings(entry: dict[str, Any]) -> tuple[str, ...]:
    """What the read behind a diagnosis cache entry could not read."""
    warnings = entry.get("warnings")
    return tuple(str(w) for w in warnings[:20]) if isinstance(warnings, list) else ()
