"""When and where the monitor diagnoses its runs, within a CPU budget, and how late results reach the app.

A mixin of :class:`tuidiag.viewmodel.model.RunsModel`. A run summarised from ``run.json``
is diagnosed after its row is listed, on one diagnosis thread: from the diagnosis cache
when it covers the run's files, here when the run is small, in a ``tuidiag status
--refresh-cache`` process when it is large. A growing run is re-diagnosed at once when
events arrived or a job saved a result, and when only rows did at most as often as :data:`DIAGNOSIS_BUDGET`
allows; diagnoses that finish after their refresh are announced to the app together.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tuidiag.cli import status_cache
from tuidiag.diagnosis import Diagnosis, diagnose
from tuidiag.format import EVENTS_DIR, STATUS_RUNNING
from tuidiag.store import Run
from tuidiag.store.discovery import list_shards
from tuidiag.store.job_results import job_records, results_mark
from tuidiag.store.manifest import effective_status
from tuidiag.viewmodel.read_pool import ReadPool
from tuidiag.viewmodel.run_slot import Diagnosed, RunSlot
from tuidiag.viewmodel.snapshot import PENDING, Health, summarize_tail

DIAGNOSIS_BUDGET = 0.01
"""Share of one core that re-diagnosing runs which only got new rows may take (reading their new rows included): with
ten live runs of 20k steps each badge is diagnosed again about every minute (an event at once, the open run every 30 s)."""
DIAGNOSIS_MAX_AGE = 30.0
"""The live diagnosis of the growing run whose view is open is never older than this (seconds, plus one refresh)."""
BADGE_MAX_AGE = 300.0
"""The health badge of another growing run is never older than this: with many live runs the CPU budget spaces
their diagnoses out (an event, a NaN's included, is diagnosed at once)."""
SMALL_RUN_ROWS = 500_000
"""Runs with at most this many rows are diagnosed in the monitor (read whole, and tailed while they run);
larger ones in a separate process, whose finding the diagnosis cache hands back."""
ANNOUNCE_AFTER = 0.25
"""Seconds over which diagnoses that finish after their refresh are announced to the app together."""


class RunDiagnoses:
    """The model's diagnoses of its runs (the model's state is its own: see ``RunsModel.__init__``)."""

    root: Path
    clock: Callable[[], float]
    on_late: Callable[[Path], None] | None
    _lock: threading.Lock
    _diagnoses: dict[Path, Diagnosed]
    _growing: dict[Path, float]
    _diagnosis_pool: ReadPool
    _focus: tuple[Path | None, float]
    _hold_until: float
    _announcing: threading.Timer | None
    _announced: set[Path]
    _closed: bool
    _cache_lock: threading.Lock

    def _diagnose_later(self, slot: RunSlot) -> None:
        """Queue the diagnosis of a run summarised from ``run.json``, unless it covers the newest rows already."""
        tail = slot.tail
        if tail is None or (slot.diagnosing is not None and not slot.diagnosing.done()):
            return
        done = slot.diagnosed  # the results listed only when the rows are covered: the first refresh of many runs lists none
        if done is not None and done[:2] == (tail.seq, tail.rows) and done[2] == results_mark(slot.path):
            return
        slot.diagnosing = self._diagnosis_pool.submit(lambda: self._diagnose(slot))

    def hold_diagnoses(self, seconds: float) -> None:
        """Start no diagnosis for ``seconds``: a diagnosis holds the interpreter for most of its time, and the
        monitor's first draw of a long list of runs would share it."""
        self._hold_until = time.monotonic() + seconds

    def _diagnose(self, slot: RunSlot) -> None:
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
            shown, computed, before = (slot.health, slot.warnings), self._diagnoses.get(slot.path), slot.diagnosed
            jobs = results_mark(slot.path)  # taken first: a result saved meanwhile is diagnosed next time
            covered = (tail.seq, tail.rows, jobs)
            try:
                signature, _ = status_cache.signature(slot.path)
                cached = status_cache.load(slot.path)
                whole_kept = not slot.want_whole or (cached is not None and status_cache.diagnosis_of(cached) is not None)
                if slot.run is None and cached is not None and cached.get("signature") == signature and whole_kept:
                    slot.health, slot.diagnosed = _cached_health(cached), covered
                    slot.warnings = _cached_warnings(cached)
                elif slot.run is None and tail.rows > SMALL_RUN_ROWS:
                    if cached is not None:
                        slot.health, slot.warnings = _cached_health(cached), _cached_warnings(cached)
                    if status_cache.due(cached):
                        with self._cache_lock:  # none started once the monitor closed
                            if not self._closed:
                                status_cache.start_background(slot.path)
                else:
                    start = time.thread_time()
                    run = self._open(slot)  # the tail read counts against the diagnosis budget too
                    diagnosis = self._diagnosis(slot.path, run, time.thread_time() - start)
                    top = diagnosis.top
                    slot.health = Health(top.code, top.title, top.severity, top.confidence)
                    slot.warnings = tuple(run.warnings)
                    if self._diagnoses[slot.path].rows == run.rows_read:  # not one the CPU budget kept from before
                        slot.diagnosed = covered
                        self._store(slot.path, signature, diagnosis, self._diagnoses[slot.path].cost, run.warnings)
                    if effective_status(slot.manifest) != STATUS_RUNNING:
                        slot.run = None  # a finished run is not tailed: its rows need not stay in memory
                slot.summary = summarize_tail(slot.path, slot.manifest, tail, slot.health, self.clock(), slot.warnings)
            except Exception:  # a diagnosis that fails leaves the row as it was; the run view says why
                slot.diagnosed = covered
            new_jobs = before is not None and before[2] != jobs and slot.diagnosed == covered
            changed = ((slot.health, slot.warnings) != shown or new_jobs
                       or (slot.want_whole and self._diagnoses.get(slot.path) is not computed))
        # a new badge, one that covers a new job result (the open view's evidence and fix change, the badge perhaps
        # not), or the whole diagnosis the run view waits for: the app draws it
        if changed:
            self._announce(slot.path)

    def _not_due(self, slot: RunSlot) -> bool:
        """True when a run tailed here was diagnosed so recently that the CPU budget puts off the next diagnosis
        (no event arrived since): nothing is read until then."""
        computed = self._diagnoses.get(slot.path)
        if slot.run is None or computed is None:
            return False
        mark = tuple((shard.rank, shard.last) for shard, _ in list_shards(slot.path / EVENTS_DIR))[-8:]
        if mark != slot.events_mark:
            slot.events_mark = mark
            return False
        if results_mark(slot.path) != computed.jobs:  # a job saved a result: its evidence is shown at once
            return False
        now = time.monotonic()
        if now - computed.at < self._rediagnose_after(now, slot.path):
            self._growing[slot.path] = now
            return True
        return False

    def close(self) -> None:
        """The monitor is closing: diagnoses still queued start no read, and once this returns no diagnosis writes a
        cache entry or starts a background one, not even one that was running when it was called (its thread
        outlives the app, and the environment that named the cache directory may be gone). A write in progress
        is waited for (an atomic write of a small file)."""
        with self._cache_lock:
            self._closed = True

    def _store(self, path: Path, signature: str, diagnosis: Diagnosis, cost: float, warnings: list[str]) -> None:
        """Cache a diagnosis for the status line and the next start, unless the monitor closed (:meth:`close`):
        the check and the write hold one lock, so :meth:`close` never returns between them."""
        with self._cache_lock:
            if not self._closed:
                status_cache.store(path, signature, diagnosis, cost, warnings)

    def _announce(self, path: Path) -> None:
        """Tell the app that run ``path``'s summary changed after its refresh returned: the runs that changed
        within :data:`ANNOUNCE_AFTER` seconds are announced together."""
        if self.on_late is None:
            return
        with self._lock:
            self._announced.add(path)
            if self._announcing is not None:
                return
            self._announcing = threading.Timer(ANNOUNCE_AFTER, self._announce_now)
            self._announcing.daemon = True
            self._announcing.start()

    def _announce_now(self) -> None:
        with self._lock:
            self._announcing = None
            paths, self._announced = self._announced, set()
        if self.on_late is not None and not self._closed:
            for path in sorted(paths):
                self.on_late(path)

    def _full_diagnosis(self, slot: RunSlot) -> Diagnosis:
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

    def _diagnosis(self, path: Path, run: Run, read_cost: float = 0.0) -> Diagnosis:
        """The live diagnosis of ``run``: recomputed at once when events arrived; when only
        rows did, once the last one is older than :meth:`_rediagnose_after` seconds. ``read_cost``: CPU seconds
        the read of its new rows took, counted with the diagnosis's own in the budget (:data:`DIAGNOSIS_BUDGET`)."""
        rows, events, jobs = run.rows_read, len(run.events), results_mark(path)
        cached = self._diagnoses.get(path)
        now = time.monotonic()
        if cached is not None and cached.events == events and cached.jobs == jobs:
            if cached.rows == rows:
                return cached.diagnosis
            self._growing[path] = now
            if now - cached.at < self._rediagnose_after(now, path):
                return cached.diagnosis
        start = time.thread_time()
        diagnosis = diagnose(run, jobs=job_records(run))
        self._diagnoses[path] = Diagnosed(rows, events, diagnosis, now, time.thread_time() - start + read_cost, jobs)
        return diagnosis

    def _rediagnose_after(self, now: float, path: Path | None = None) -> float:
        """Seconds between diagnoses of a growing run: all growing runs' diagnoses within budget; the run whose
        view is open is never left more than :data:`DIAGNOSIS_MAX_AGE` behind, the others :data:`BADGE_MAX_AGE`.
        While a run's view is open the other runs' badges are not on screen: they wait the full
        :data:`BADGE_MAX_AGE` (an event is still diagnosed at once); the open run keeps its pace."""
        diagnosed = dict(self._diagnoses)  # copies: other runs are diagnosed on other threads
        open_view = self._focus[0] is not None and now - self._focus[1] < DIAGNOSIS_MAX_AGE
        if open_view and path != self._focus[0]:
            return BADGE_MAX_AGE
        cost = sum(diagnosed[p].cost for p, t in list(self._growing.items()) if now - t < DIAGNOSIS_MAX_AGE and p in diagnosed)
        return min(DIAGNOSIS_MAX_AGE if open_view and path is not None else BADGE_MAX_AGE, cost / DIAGNOSIS_BUDGET)


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
