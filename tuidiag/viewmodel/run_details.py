"""The run view's and the compare view's data, built by the monitor's model from a run's envelopes or rows.

A mixin of :class:`tuidiag.viewmodel.model.RunsModel`. A run summarised from ``run.json``
is drawn from its envelopes (its rows never held here); others, and replays, from all
their rows, downsampled to :data:`ROWS_POINTS` points a line. Each view is rebuilt only
when its run got new data.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np

from tuidiag.diagnosis import diagnose
from tuidiag.format import LOSS
from tuidiag.store import Run
from tuidiag.store.envelope_run import open_envelopes
from tuidiag.store.job_results import job_records
from tuidiag.viewmodel.compare_view import CompareView, compare_view, run_compared
from tuidiag.viewmodel.detail import DetailData, build_detail, detail_data
from tuidiag.viewmodel.envelope_view import Window, envelope_detail_data
from tuidiag.viewmodel.run_slot import RunSlot
from tuidiag.viewmodel.snapshot import RunDetail, summarize_tail

ROWS_POINTS = 400
"""Points per chart line of a run read whole (older writers, several ranks, a replay); runs drawn from
envelopes get one min/max bucket per cell of the chart's width."""


class RunDetails:
    """The model's views of one run, or of several compared (the model's state is its own: see ``RunsModel.__init__``)."""

    clock: Callable[[], float]
    _lock: threading.Lock
    _slots: dict[Path, RunSlot]
    _details: dict[Path, tuple[tuple[int, int, int | None, int], object, DetailData]]
    _samples: dict[Path, tuple[int, np.ndarray]]
    _focus: tuple[Path | None, float]

    def detail(self, key: str, at: int | None = None, points: int = 400, wait: float | None = None,
               window: Window | None = None, dist: str | None = None) -> RunDetail | None:
        """The run view's data for run ``key`` as of step ``at``; ``None`` when the run is not
        read yet, is unreadable, or is still being read after ``wait`` seconds (default: no limit).
        ``dist``: the distribution the distribution chart shows (default: the run's first).

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
                shown = self._envelope_detail(slot, points, window, dist)
                if shown is not None:
                    return shown
            run = self._open(slot) if slot.tail is not None or slot.run is None else slot.run
            path = slot.path
            live = self._diagnosis(path, run)
            diagnosis = live if at is None else diagnose(run, at=at, jobs=job_records(run))
            points = ROWS_POINTS  # runs read whole keep their downsampling (MinMaxLTTB) at a fixed size
            stamp = (run.rows_read, len(run.events), at, points, window, dist)
            model = run.manifest.get("model")
            cached = self._details.get(path)
            if cached is None or cached[0] != stamp or cached[1] != model:
                cached = self._details[path] = (stamp, model, detail_data(run, at, points, window, dist))
            detail = build_detail(run, self._summary(path, run, live), diagnosis, at, points, live, cached[2])
            if at is None and run.status == "running":  # live: the steps change at every flush, and only replay uses them
                return detail
            return replace(detail, samples=self._loss_steps(path, run))
        except Exception:  # a run whose data breaks the view: the overview still says what it can
            return None
        finally:
            slot.lock.release()

    def _envelope_detail(self, slot: RunSlot, points: int, window: Window | None, dist: str | None = None) -> RunDetail | None:
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
        stamp = (envelopes.rows_read, len(envelopes.events), window, points, dist, pace)
        model = envelopes.manifest.get("model")
        cached = self._details.get(slot.path)
        if cached is None or cached[0] != stamp or cached[1] != model:
            cached = self._details[slot.path] = (stamp, model, envelope_detail_data(envelopes, points, window, dist, pace))
        if summary is not None and summary.health != slot.health.code:
            summary = summarize_tail(slot.path, slot.manifest, slot.tail, slot.health, self.clock(), slot.warnings) if slot.tail else summary
        return build_detail(envelopes, summary, diagnosis, None, points, diagnosis, cached[2])

    def _loss_steps(self, path: Path, run: Run) -> np.ndarray:
        """The steps of ``run``'s loss, copied once per change of its data (the UI never sees the run's arrays)."""
        kept = self._samples.get(path)
        if kept is None or kept[0] != run.rows_read:
            steps = np.array(run.series(LOSS).steps, dtype=np.int64)
            steps.flags.writeable = False
            kept = self._samples[path] = (run.rows_read, steps)
        return kept[1]

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
