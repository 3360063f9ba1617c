"""``RunsModel``: the runs under a root, refreshed incrementally, summarised and detailed.

Called from worker threads only; a lock serialises refreshes so two workers never
mutate the same ``Run`` at once.
"""

from __future__ import annotations

import threading
import time
from typing import Callable
from pathlib import Path

from tuidiag.diagnosis import Diagnosis, diagnose
from tuidiag.diagnosis.view import VAL_LOSS_NAMES, RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS
from tuidiag.live.detail import build_detail
from tuidiag.live.downsample import downsample
from tuidiag.live.snapshot import Chart, RunDetail, RunSummary, summarize
from tuidiag.store import Run, find_runs, open_run


class RunsModel:
    """All runs at or below ``root``."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self.clock = clock
        self.runs: dict[Path, Run] = {}
        self._diagnoses: dict[Path, tuple[int, int, Diagnosis]] = {}
        self._lock = threading.Lock()

    def discover(self) -> list[Path]:
        """Open runs that appeared since the last call; return their paths."""
        with self._lock:
            found = [p for p in find_runs(self.root) if p not in self.runs]
            for path in found:
                self.runs[path] = open_run(path)
            return found

    def refresh(self, dirs: set[Path] | None = None) -> list[RunSummary]:
        """Read new data of ``dirs`` (default: every run) and return every run's summary."""
        with self._lock:
            for path, run in self.runs.items():
                if dirs is None or path in dirs or path.resolve() in dirs:
                    run.refresh()
            return [summarize(run, self._diagnosis(path, run), self.clock()) for path, run in sorted(self.runs.items())]

    def detail(self, key: str, at: int | None = None, points: int = 400) -> RunDetail | None:
        """The run view's data for run ``key`` as of step ``at``."""
        with self._lock:
            path = Path(key)
            run = self.runs.get(path)
            if run is None:
                return None
            live = self._diagnosis(path, run)
            diagnosis = live if at is None else diagnose(run, at=at)
            return build_detail(run, summarize(run, live, self.clock()), diagnosis, at, points, live)

    def _diagnosis(self, path: Path, run: Run) -> Diagnosis:
        """The live diagnosis, recomputed only when new rows or events arrived."""
        stamp = (run.rows_read, len(run.events))
        cached = self._diagnoses.get(path)
        if cached is None or cached[:2] != stamp:
            cached = (*stamp, diagnose(run))
            self._diagnoses[path] = cached
        return cached[2]

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
