"""``RunsModel``: the runs under a root, refreshed incrementally, summarised and detailed.

Called from worker threads only; a lock serialises refreshes so two workers never
mutate the same ``Run`` at once.

Work per refresh is kept to what changed: a run's live diagnosis is recomputed
at once when events arrived, and when only rows arrived at most as often as a
CPU budget allows (``DIAGNOSIS_BUDGET``); the run view's charts are rebuilt only
when its run got new data.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from tuidiag.diagnosis import Diagnosis, diagnose
from tuidiag.diagnosis.view import VAL_LOSS_NAMES, RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS
from tuidiag.live.detail import DetailData, build_detail, detail_data
from tuidiag.live.downsample import downsample, tail_spark
from tuidiag.live.snapshot import Chart, RunDetail, RunSummary, summarize
from tuidiag.store import Run, find_runs, open_run


DIAGNOSIS_BUDGET = 0.02
"""Share of one core that re-diagnosing runs which only got new rows may take."""
DIAGNOSIS_MAX_AGE = 30.0
"""The live diagnosis of a growing run is never older than this (seconds, plus one refresh)."""


@dataclass
class _Diagnosed:
    rows: int
    events: int
    diagnosis: Diagnosis
    at: float
    """``time.monotonic()`` when computed."""
    cost: float
    """CPU seconds it took."""


class RunsModel:
    """All runs at or below ``root``."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self.clock = clock
        self.runs: dict[Path, Run] = {}
        self._diagnoses: dict[Path, _Diagnosed] = {}
        self._growing: dict[Path, float] = {}
        """When each run last had rows newer than its diagnosis (``time.monotonic()``)."""
        self._details: dict[Path, tuple[tuple[int, int, int | None, int], object, DetailData]] = {}
        self._resolved: dict[Path, Path] = {}
        self._sparks: dict[Path, tuple[object, tuple[float, ...]]] = {}
        self._lock = threading.Lock()

    def discover(self) -> list[Path]:
        """Open runs that appeared since the last call; return their paths."""
        with self._lock:
            found = [p for p in find_runs(self.root) if p not in self.runs]
            for path in found:
                self.runs[path] = open_run(path)
            return found

    def knows(self, dirs: set[Path]) -> bool:
        """True when every one of ``dirs`` is a run already open (no discovery needed)."""
        with self._lock:
            known = set(self.runs) | {self._resolve(p) for p in self.runs}
        return all(d in known or d.resolve() in known for d in dirs)

    def refresh(self, dirs: set[Path] | None = None) -> list[RunSummary]:
        """Read new data of ``dirs`` (default: every run) and return every run's summary."""
        with self._lock:
            for path, run in self.runs.items():
                if dirs is None or path in dirs or self._resolve(path) in dirs:
                    run.refresh()
            return [self._summary(path, run) for path, run in sorted(self.runs.items())]

    def detail(self, key: str, at: int | None = None, points: int = 400) -> RunDetail | None:
        """The run view's data for run ``key`` as of step ``at``."""
        with self._lock:
            path = Path(key)
            run = self.runs.get(path)
            if run is None:
                return None
            live = self._diagnosis(path, run)
            diagnosis = live if at is None else diagnose(run, at=at)
            stamp = (run.rows_read, len(run.events), at, points)
            model = run.manifest.get("model")
            cached = self._details.get(path)
            if cached is None or cached[0] != stamp or cached[1] != model:
                cached = self._details[path] = (stamp, model, detail_data(run, at, points))
            return build_detail(run, self._summary(path, run, live), diagnosis, at, points, live, cached[2])

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
        diagnosis = diagnose(run)
        self._diagnoses[path] = _Diagnosed(rows, events, diagnosis, now, time.thread_time() - start)
        return diagnosis

    def _rediagnose_after(self, now: float) -> float:
        """Seconds between diagnoses of a growing run: all growing runs' diagnoses within budget."""
        cost = sum(self._diagnoses[p].cost for p, t in self._growing.items() if now - t < DIAGNOSIS_MAX_AGE and p in self._diagnoses)
        return min(DIAGNOSIS_MAX_AGE, cost / DIAGNOSIS_BUDGET)

    def compare(self, keys: tuple[str, ...], points: int = 300) -> dict[str, Chart]:
        """Loss, validation loss and gradient norm of several runs on shared charts, by step."""
        with self._lock:
            views = [(run.name, RunView(run)) for key in keys if (run := self.runs.get(Path(key))) is not None]
            return {
                "loss": Chart("train loss", _lines(views, LOSS, points), log_default=True),
                "val": Chart("validation loss", tuple(line for n, v in views if (name := v.first_present(VAL_LOSS_NAMES))
                                                      for line in _lines([(n, v)], name, points))),
                "grad": Chart("gradient norm", _lines(views, GRAD_NORM_TOTAL, points), log_default=True),
            }


def _lines(views: list[tuple[str, RunView]], metric: str, points: int) -> tuple[tuple[str, object, object], ...]:
    lines = []
    for name, view in views:
        steps, values = view.series(metric)
        if len(steps):
            lines.append((name, *downsample(steps, values, points)))
    return tuple(lines)
