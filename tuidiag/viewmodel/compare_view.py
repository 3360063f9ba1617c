"""What the compare screen shows: the runs' overlaid charts and the before/after comparisons.

The first run is *A* (before); every later run is a *B* (after) compared with it, by
the same computation as ``tuidiag compare`` (:mod:`tuidiag.report.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tuidiag.diagnosis import Diagnosis
from tuidiag.diagnosis.view import VAL_LOSS_NAMES, RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS
from tuidiag.report.compare import Comparison, compare_summaries, summarize
from tuidiag.store import Run
from tuidiag.viewmodel.downsample import downsample
from tuidiag.viewmodel.snapshot import Chart

Line = tuple[str, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class RunCompared:
    """One run's part of a comparison, taken while the run was locked: its facts and its chart lines."""

    key: str
    summary: dict[str, Any]
    lines: dict[str, tuple[Line, ...]]
    """Downsampled lines by chart (``loss``, ``val``, ``grad``); empty where the run has no such metric."""


@dataclass(frozen=True)
class CompareView:
    """The compare screen's data: runs in order (A first), charts, and A against each later run."""

    keys: tuple[str, ...]
    names: tuple[str, ...]
    charts: dict[str, Chart]
    comparisons: tuple[Comparison, ...]
    unreadable: tuple[str, ...] = ()
    """Keys of the runs asked for that could not be read (not in ``names``)."""


def run_compared(key: str, run: Run, diagnosis: Diagnosis, points: int) -> RunCompared:
    """The facts and chart lines of one run (call while nothing else touches ``run``)."""
    view = RunView(run)
    val_name = view.first_present(VAL_LOSS_NAMES)
    lines = {"loss": _line(view, run.name, LOSS, points),
             "val": _line(view, run.name, val_name, points) if val_name else (),
             "grad": _line(view, run.name, GRAD_NORM_TOTAL, points)}
    return RunCompared(key, summarize(run, diagnosis), lines)


def compare_view(keys: tuple[str, ...], runs: list[RunCompared]) -> CompareView:
    """Charts of every run in ``runs`` and the comparison of the first with each later one."""
    charts = {
        "loss": Chart("train loss", _all(runs, "loss"), log_default=True),
        "val": Chart("validation loss", _all(runs, "val")),
        "grad": Chart("gradient norm", _all(runs, "grad"), log_default=True),
    }
    comparisons = tuple(compare_summaries(runs[0].summary, b.summary) for b in runs[1:]) if runs else ()
    read = {r.key for r in runs}
    return CompareView(tuple(r.key for r in runs), tuple(str(r.summary["name"]) for r in runs), charts, comparisons,
                       tuple(k for k in keys if k not in read))


def _all(runs: list[RunCompared], chart: str) -> tuple[Line, ...]:
    return tuple(line for run in runs for line in run.lines[chart])


def _line(view: RunView, label: str, metric: str, points: int) -> tuple[Line, ...]:
    steps, values = view.series(metric)
    if not len(steps):
        return ()
    x, y = downsample(steps, values, points)
    return ((label, x, y),)
