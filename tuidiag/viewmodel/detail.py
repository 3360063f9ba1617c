"""Building a ``RunDetail``: downsampled charts, the layer grid, events and system figures."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tuidiag.diagnosis import Diagnosis
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView, VAL_LOSS_NAMES
from tuidiag.format import (
    EVENT_ACTION, GRAD_NORM_PREFIX, GRAD_NORM_TOTAL, LOSS, SYS_GPU_UTIL, SYS_MEM_ALLOCATED, SYS_MEM_PEAK, UPDATE_RATIO_PREFIX,
)
from tuidiag.viewmodel.actions import past_actions
from tuidiag.viewmodel.chart_clock import Clock, clock_of
from tuidiag.diagnosis.distributions import distribution_names, nonfinite_name
from tuidiag.diagnosis.rules.data_wait import data_wait_share
from tuidiag.viewmodel.distributions import DIST_CHART, distribution_chart, shown_distribution
from tuidiag.viewmodel.downsample import downsample, minmax_points
from tuidiag.viewmodel.jobs_view import job_texts
from tuidiag.viewmodel.ranks import RankLines, rank_lines
from tuidiag.viewmodel.snapshot import Chart, LayerGrid, RunDetail, RunSummary, run_speed
from tuidiag.store import Event, Run
from tuidiag.store.job_results import step_from_run

MAX_EVENTS = 500
MEMORY_FIGURES = ((SYS_MEM_ALLOCATED, "mem"), (SYS_MEM_PEAK, "peak"))
"""The device-memory figures of the run view's header, with their labels (the envelope view shows the same)."""


@dataclass(frozen=True)
class DetailData:
    """The parts of a run view that depend on the run's data only (not on the diagnosis or the clock)."""

    charts: dict[str, Chart]
    layers: LayerGrid
    events: tuple[Event, ...]
    system: tuple[tuple[str, str], ...]
    steps: tuple[int, int]
    event_steps: frozenset[int]
    ranks: RankLines | None = None
    clip_threshold: float | None = None
    dists: tuple[str, ...] = ()
    """The run's distributions, in the order the distribution tab's key cycles through them."""


def detail_data(run: Run, at: int | None, points: int, window: tuple[int, int] | None = None,
                dist: str | None = None) -> DetailData:
    """Charts, layer grid, events and system figures of ``run`` as of ``at`` (charts over ``window``: a zoom;
    the distribution chart of ``dist``, default the first distribution)."""
    view = RunView(run, at)
    steps = run.series(LOSS).steps
    dists = distribution_names(run.metric_names, view.param_order)
    charts = build_charts(view, points, window)
    shown = shown_distribution(dists, dist)
    nonfinite = shown is not None and bool(np.any(view.series(nonfinite_name(shown))[1] > 0))
    charts[DIST_CHART] = replace(distribution_chart(dists, shown, lambda name, label: _line(view, name, points, label, window, True), nonfinite),
                                 clock=charts["loss"].clock)
    return DetailData(
        charts=marks_within(mark_resumes(charts, view.resume_steps), window),
        layers=layer_grid(view, max(8, points // 4)),
        events=tuple(view.events()[-MAX_EVENTS:]),
        system=system_figures(view),
        steps=(int(steps[0]), int(steps[-1])) if len(steps) else (0, 0),
        event_steps=frozenset(e.step for e in run.events),
        ranks=rank_lines(view, points),
        clip_threshold=float(view.clip_threshold.value) if view.clip_threshold else None,
        dists=dists,
    )


def build_detail(run: Run, summary: RunSummary, diagnosis: Diagnosis, at: int | None, points: int, live: Diagnosis | None = None,
                 data: DetailData | None = None) -> RunDetail:
    """Everything the run view draws for ``run`` as of ``at`` (``live``: the diagnosis of the whole run).

    ``data``: :func:`detail_data` of the same run, data, ``at`` and ``points``, computed earlier.
    """
    data = data if data is not None else detail_data(run, at, points)
    return RunDetail(
        summary=summary,
        charts=data.charts,
        layers=data.layers,
        diagnosis=diagnosis,
        events=data.events,
        system=data.system,
        at=at,
        steps=data.steps,
        first_steps={f.code: f.first_step for f in diagnosis.findings if f.first_step is not None},
        jobs=job_texts(run.path, at, step_from_run(run)),
        ranks=data.ranks,
        clip_threshold=data.clip_threshold,
        marks=tuple(sorted(data.event_steps | {f.first_step for f in (live or diagnosis).findings if f.first_step is not None})),
        dists=data.dists,
    )


def _line(view: RunView, name: str, points: int, label: str | None = None,
          window: tuple[int, int] | None = None, extremes: bool = False) -> tuple[str, np.ndarray, np.ndarray] | None:
    """One chart line of ``name`` over ``window``: downsampled by MinMaxLTTB, or with ``extremes`` as min/max
    buckets that keep every extreme (:func:`minmax_points`)."""
    steps, values = view.series(name)
    if window is not None:
        inside = (steps >= window[0]) & (steps <= window[1])
        steps, values = steps[inside], values[inside]
    if not len(steps):
        return None
    x, y = minmax_points(steps, values, points) if extremes else downsample(steps, values, points)
    return (label or name, x, y)


def build_charts(view: RunView, points: int, window: tuple[int, int] | None = None) -> dict[str, Chart]:
    """Loss (train and validation), gradient norm, LR and update ratio charts (over ``window``: a zoom), each with the run's clock."""
    charts: dict[str, Chart] = {}
    past = past_actions(view.events(EVENT_ACTION))
    actions = tuple(sorted({a.step for a in past if not a.failed}))[:20]  # marked on every chart
    failed = tuple(sorted({a.step for a in past if a.failed}))[:20]
    loss_steps, loss = view.loss
    val_name = view.first_present(VAL_LOSS_NAMES)
    lines = [line for line in (_line(view, LOSS, points, "train", window), _line(view, val_name, points, "val", window) if val_name else None) if line]
    bad = tuple(int(s) for s in loss_steps[~np.isfinite(loss)][:50])
    finite = loss[np.isfinite(loss) & (loss > 0)]
    charts["loss"] = Chart("loss", tuple(lines), bad, log_default=bool(len(finite) and finite.max() / finite.min() > 100), actions=actions, failed_actions=failed)
    grad = _line(view, GRAD_NORM_TOTAL, points, "grad norm", window)
    clip = view.clip_threshold
    charts["grad"] = Chart("gradient norm (pre-clip)", (grad,) if grad else (), threshold=float(clip.value) if clip else None, log_default=True, actions=actions, failed_actions=failed)
    lrs = [line for name in view.run.metric_names if name.startswith("lr/") for line in [_line(view, name, points, window=window)] if line]
    charts["lr"] = Chart("learning rate", tuple(lrs[:4]), actions=actions, failed_actions=failed)
    layers = view.weight_params
    picks = [layers[i] for i in sorted({0, len(layers) // 2, len(layers) - 1})] if layers else []
    updates = [line for name in picks for line in [_line(view, UPDATE_RATIO_PREFIX + name, points, name, window)] if line]
    charts["update"] = Chart("update/weight ratio", tuple(updates), log_default=True, actions=actions, failed_actions=failed)
    return with_clock(charts, run_clock(view, points))


def with_clock(charts: dict[str, Chart], clock: Clock | None) -> dict[str, Chart]:
    """``charts``, each with ``clock`` for a wall-clock x axis (as they are when it is ``None``)."""
    return {name: replace(chart, clock=clock) for name, chart in charts.items()} if clock is not None else charts


def run_clock(view: RunView, points: int) -> Clock | None:
    """(step, seconds since the first step) of the loss rows up to the view's step, at most ``points`` of them."""
    steps = view.loss[0]
    walls = view.run.series(LOSS).wall_times[: len(steps)]  # the view's loss is a prefix of the run's
    return clock_of(steps, walls, points)


def mark_resumes(charts: dict[str, Chart], resumes: tuple[int, ...]) -> dict[str, Chart]:
    """``charts`` with the steps where a later session continued the run marked on each (the newest 20)."""
    if not resumes:
        return charts
    return {name: replace(chart, resumes=resumes[-20:]) for name, chart in charts.items()}


def marks_within(charts: dict[str, Chart], window: tuple[int, int] | None) -> dict[str, Chart]:
    """``charts`` without the marked steps (non-finite values, actions, resumes) outside ``window`` (a zoom):
    a mark outside would widen the step axis past the window. Each chart keeps the window, so that the
    event marker and the cursor, set later, are left out there too (:func:`~tuidiag.viewmodel.chart_axes.plot_data`)."""
    if window is None:
        return charts

    def inside(steps: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(s for s in steps if window[0] <= s <= window[1])

    return {name: replace(chart, nonfinite_steps=inside(chart.nonfinite_steps), actions=inside(chart.actions),
                          failed_actions=inside(chart.failed_actions), resumes=inside(chart.resumes), window=window)
            for name, chart in charts.items()}


def layer_grid(view: RunView, bins: int) -> LayerGrid:
    """Median log10 gradient norm of each weight layer in each of ``bins`` step ranges."""
    layers = view.weight_params or view.param_order
    last = view.last_step or 0
    edges = np.linspace(0, last + 1, bins + 1)
    grid = np.full((len(layers), bins), np.nan)
    bins_of: dict[tuple[int, int, tuple[int, ...]], np.ndarray] = {}  # layers recorded together share one steps array
    for row, name in enumerate(layers):
        steps, values = view.series(GRAD_NORM_PREFIX + name)
        ok = np.isfinite(values) & (values > 0)
        if not ok.any():
            continue
        key = (steps.__array_interface__["data"][0], len(steps), steps.strides)
        which = bins_of.get(key)
        if which is None:
            which = bins_of[key] = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, bins - 1)
        if not ok.all():
            which = which[ok]
        logs = np.log10(values[ok])
        sums = np.bincount(which, weights=logs, minlength=bins)
        counts = np.bincount(which, minlength=bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            grid[row] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return LayerGrid(tuple(layers), grid, edges)


def system_figures(view: RunView) -> tuple[tuple[str, str], ...]:
    """Steps/s (:func:`run_speed`, as the overview shows it), data-wait share, device memory and GPU
    utilisation, as labelled strings."""
    figures = []
    speed = run_speed(view.run, view.at)
    if speed is not None:
        figures.append(("steps/s", fmt(speed)))
    waiting = data_wait_share(view)
    if waiting is not None and np.isfinite(waiting.share):
        figures.append(("data wait", waiting.percent))
    for name, label in MEMORY_FIGURES:
        values = view.series(name)[1]
        if len(values):
            figures.append((label, f"{values[-1] / 2**30:.1f} GiB"))
    util = view.series(SYS_GPU_UTIL)[1]
    if len(util):
        figures.append(("GPU", f"{util[-1]:.0f}%"))
    return tuple(figures)
