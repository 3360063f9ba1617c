"""What the compare screen shows: the runs' overlaid charts and the before/after comparisons.

The first run is *A* (before); every later run is a *B* (after) compared with it, by
the same computation as ``tuidiag compare`` (:mod:`tuidiag.report.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuidiag.diagnosis import Diagnosis
from tuidiag.diagnosis.view import VAL_LOSS_NAMES, RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS
from tuidiag.report.compare import Comparison, compare_summaries, summarize
from tuidiag.store import Run
from tuidiag.text.safe import clean
from tuidiag.viewmodel.downsample import downsample
from tuidiag.viewmodel.snapshot import LABEL_CELLS, Chart

Line = tuple[str, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class CompareChart:
    """One overlay chart of the compare screen: its id, its tab's label, its title, and the metric each run gives it."""

    id: str
    label: str
    """The tab's label."""
    title: str
    """The chart's title."""
    metric: str | None
    """The metric drawn (None: the run's validation loss, whichever of ``VAL_LOSS_NAMES`` it has)."""
    log_default: bool = False


COMPARE_CHARTS: tuple[CompareChart, ...] = (
    CompareChart("loss", "Train loss", "train loss", LOSS, log_default=True),
    CompareChart("val", "Validation loss", "validation loss", None),
    CompareChart("grad", "Grad norm", "gradient norm", GRAD_NORM_TOTAL, log_default=True),
)
"""The compare screen's charts, in tab order: the view builds them and the screen's tabs and keys list them."""


@dataclass(frozen=True)
class RunCompared:
    """One run's part of a comparison, taken while the run was locked: its facts and its chart lines."""

    key: str
    summary: dict[str, Any]
    lines: dict[str, tuple[Line, ...]]
    """Downsampled lines by chart id (:data:`COMPARE_CHARTS`); empty where the run has no such metric."""
    nonfinite: dict[str, int] = field(default_factory=dict)
    """By chart id, the first step at which the run's value was NaN/Inf (absent: none was)."""


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
    metrics = {chart.id: chart.metric if chart.metric is not None else val_name for chart in COMPARE_CHARTS}
    nonfinite = {chart: step for chart, metric in metrics.items() if metric and (step := _first_nonfinite(view, metric)) is not None}
    lines = {chart: _line(view, _label(run.name, nonfinite.get(chart)), metric, points) if metric else ()
             for chart, metric in metrics.items()}
    return RunCompared(key, summarize(run, diagnosis), lines, nonfinite)


def _label(name: str, first_bad: int | None) -> str:
    """The run's name in the legend; a run that went NaN/Inf says from which step (whose red line is whose), its
    name cut to keep that in the legend's :data:`~tuidiag.viewmodel.snapshot.LABEL_CELLS`."""
    if first_bad is None:
        return name
    suffix = f" (NaN from {first_bad})"
    return clean(name, max(8, LABEL_CELLS - len(suffix))) + suffix


def compare_view(keys: tuple[str, ...], runs: list[RunCompared]) -> CompareView:
    """Charts of every run in ``runs`` and the comparison of the first with each later one."""
    charts = {chart.id: Chart(chart.title, _all(runs, chart.id), log_default=chart.log_default,
                              nonfinite_steps=tuple(sorted(run.nonfinite[chart.id] for run in runs if chart.id in run.nonfinite)))
              for chart in COMPARE_CHARTS}  # a run that went NaN/Inf: a red line where it first did, as in the run view
    comparisons = tuple(compare_summaries(runs[0].summary, b.summary) for b in runs[1:]) if runs else ()
    read = {r.key for r in runs}
    return CompareView(tuple(r.key for r in runs), tuple(str(r.summary["name"]) for r in runs), charts, comparisons,
                       tuple(k for k in keys if k not in read))


def _all(runs: list[RunCompared], chart: str) -> tuple[Line, ...]:
    return tuple(line for run in runs for line in run.lines[chart])


def _first_nonfinite(view: RunView, metric: str) -> int | None:
    """The first step at which ``metric`` was NaN/Inf (None: never)."""
    steps, values = view.series(metric)
    bad = np.flatnonzero(~np.isfinite(values))
    return int(steps[bad[0]]) if len(bad) else None


def _line(view: RunView, label: str, metric: str, points: int) -> tuple[Line, ...]:
    steps, values = view.series(metric)
    if not len(steps):
        return ()
    x, y = downsample(steps, values, points)
    return ((label, x, y),)
