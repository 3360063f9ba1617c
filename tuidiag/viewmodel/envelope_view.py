"""The run view's charts, layer grid and figures from min/max envelopes (:class:`~tuidiag.store.envelope_run.EnvelopeRun`).

Each chart line takes the level whose buckets match the chart's width over the
steps shown (the whole run, or a zoomed window), coarsened to at most
``points / 2`` buckets and drawn as each bucket's minimum and maximum
(:func:`~tuidiag.store.envelope.zigzag`): every spike is drawn, at every zoom, and
a live run and a finished one are drawn the same way. A window finer than the
finest level kept in memory is summarised from its rows, read for that window only;
over a coarser window, the buckets at its two edges may hold steps up to one bucket
beyond it, drawn at the edge.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.rules.data_wait import DATA_WAIT, STEP_TIME
from tuidiag.diagnosis.view import VAL_LOSS_NAMES, RunView
from tuidiag.format import EVENT_ACTION, GRAD_MAX_NORM, GRAD_NORM_PREFIX, GRAD_NORM_TOTAL, LOSS, SYS_GPU_UTIL, UPDATE_RATIO_PREFIX
from tuidiag.store.envelope import NO_STEP, Level, coarsen, from_rows, zigzag
from tuidiag.store.envelope_run import EnvelopeRun
from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.actions import past_actions
from tuidiag.viewmodel.chart_clock import clock_of
from tuidiag.diagnosis.distributions import distribution_names, nonfinite_name
from tuidiag.viewmodel.distributions import DIST_CHART, distribution_chart, shown_distribution
from tuidiag.viewmodel.detail import MAX_EVENTS, MEMORY_FIGURES, DetailData, mark_resumes, marks_within, with_clock
from tuidiag.viewmodel.snapshot import Chart, LayerGrid

Window = tuple[int, int]
"""An inclusive range of steps a chart shows."""


def level_between(run: EnvelopeRun, name: str, buckets: int, window: Window | None = None) -> Level | None:
    """The buckets of ``name`` over ``window`` (default: all of it), at most ``buckets`` of them, at the finest
    resolution that allows: from the levels in memory, or from the rows of the window when it is finer than those."""
    pyramid = run.pyramid(name)
    if pyramid is None:
        return None
    floor = min(pyramid.levels)
    finest = pyramid.levels[floor]
    if not len(finest):
        return None
    lo, hi = window if window is not None else (int(finest.first_step[0]), int(finest.last_step[-1]))
    span = max(1, hi - lo + 1)
    shift = 0
    while span >> shift > max(1, buckets):
        shift += 1
    if shift < floor and span >> floor < buckets // 4:  # far finer than any level kept: summarise the window's rows
        steps, values = run.rows_between(name, lo, hi)
        return from_rows(steps, values, shift)
    shift = max(shift, floor)
    stored = max(s for s in pyramid.levels if s <= shift)
    return coarsen(pyramid.levels[stored].between(lo, hi), shift)


def line(run: EnvelopeRun, name: str, points: int, label: str | None = None,
         window: Window | None = None) -> tuple[str, np.ndarray, np.ndarray] | None:
    """One chart line: ``name``'s envelope as points, or ``None`` when it has no finite value."""
    level = level_between(run, name, max(2, points // 2), window)
    if level is None:
        return None
    x, y = zigzag(level)
    if window is not None:  # the first and last buckets may reach past the window: drawn at its edges
        x = np.clip(x, window[0], window[1])
    return (label or name, x, y) if len(x) else None


def envelope_charts(run: EnvelopeRun, points: int, window: Window | None = None, dist: str | None = None) -> dict[str, Chart]:
    """Loss (train and validation), gradient norm, LR, update ratio and distribution (of ``dist``, default the
    first) charts, as ``build_charts`` and ``detail_data`` draw them."""
    view = RunView(run)
    past = past_actions(view.events(EVENT_ACTION))
    actions = tuple(sorted({a.step for a in past if not a.failed}))[:20]
    failed = tuple(sorted({a.step for a in past if a.failed}))[:20]
    val_name = next((n for n in VAL_LOSS_NAMES if run.has(n)), None)
    lines = [found for found in (line(run, LOSS, points, "train", window), line(run, val_name, points, "val", window) if val_name else None)
             if found]
    loss = run.pyramid(LOSS)
    bad: tuple[int, ...] = ()
    log_default = False
    if loss is not None:
        finest = loss.levels[min(loss.levels)]
        bad = tuple(int(s) for s in finest.first_bad[finest.first_bad != NO_STEP][:50])
        top = loss.levels[max(loss.levels)]
        low, high = np.nanmin(top.lo_pos, initial=np.inf), np.nanmax(top.hi, initial=-np.inf)
        log_default = bool(np.isfinite(low) and np.isfinite(high) and low > 0 and high / low > 100)
    charts = {"loss": Chart("loss", tuple(lines), bad, log_default=log_default, actions=actions, failed_actions=failed)}
    grad = line(run, GRAD_NORM_TOTAL, points, "grad norm", window)
    max_norm = last_value(run, GRAD_MAX_NORM)
    charts["grad"] = Chart("gradient norm (pre-clip)", (grad,) if grad else (), threshold=max_norm, log_default=True,
                           actions=actions, failed_actions=failed)
    lrs = [found for name in run.metric_names if name.startswith("lr/") for found in [line(run, name, points, window=window)] if found]
    charts["lr"] = Chart("learning rate", tuple(lrs[:4]), actions=actions, failed_actions=failed)
    layers = view.weight_params
    picks = [layers[i] for i in sorted({0, len(layers) // 2, len(layers) - 1})] if layers else []
    updates = [found for name in picks for found in [line(run, UPDATE_RATIO_PREFIX + name, points, name, window)] if found]
    charts["update"] = Chart("update/weight ratio", tuple(updates), log_default=True, actions=actions, failed_actions=failed)
    dists = distribution_names(run.metric_names, view.param_order)
    shown = shown_distribution(dists, dist)
    counts = run.pyramid(nonfinite_name(shown)) if shown is not None else None
    top = counts.levels[max(counts.levels)] if counts is not None else None
    nonfinite = top is not None and bool(np.any(top.hi[top.count > 0] > 0))
    charts[DIST_CHART] = distribution_chart(dists, shown, lambda name, label: line(run, name, points, label, window), nonfinite)
    charts = with_clock(charts, clock_of(*run.wall_marks(), points))  # from the shards' footers: the rows are not read
    return mark_resumes(charts, view.resume_steps)


def last_value(run: EnvelopeRun, name: str) -> float | None:
    """The value of the row the reader orders last (``None``: none, or not finite)."""
    pyramid = run.pyramid(name)
    if pyramid is None:
        return None
    top = pyramid.levels[max(pyramid.levels)]
    value = float(top.last_value[-1]) if len(top) else np.nan
    return value if np.isfinite(value) else None


def envelope_layers(run: EnvelopeRun, bins: int) -> LayerGrid:
    """log10 of the mean gradient norm of each weight layer in each of ``bins`` step ranges."""
    view = RunView(run)
    layers = view.weight_params or view.param_order
    last = run.last_step or 0
    edges = np.linspace(0, last + 1, bins + 1)
    grid = np.full((len(layers), bins), np.nan)
    for row, name in enumerate(layers):
        level = level_between(run, GRAD_NORM_PREFIX + name, 4 * bins, (0, last))
        if level is None or not len(level):
            continue
        which = np.clip(np.searchsorted(edges, level.first_step, side="right") - 1, 0, bins - 1)
        sums = np.bincount(which, weights=level.total, minlength=bins)
        counts = np.bincount(which, weights=level.count, minlength=bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
            grid[row] = np.where(mean > 0, np.log10(np.where(mean > 0, mean, 1.0)), np.nan)
    return LayerGrid(tuple(layers), grid, edges)


RECENT_STEPS = 200
"""The envelope strip's data wait covers the finest buckets that hold the newest this many steps."""


def recent_wait(run: EnvelopeRun) -> tuple[float, int] | None:
    """Mean data wait over mean step time in the finest buckets (256 steps) that hold the newest :data:`RECENT_STEPS`
    step times, and how many steps those buckets span; ``None`` without both series there.

    Not the rule's figure (:func:`tuidiag.diagnosis.rules.data_wait.data_wait_share`: medians over the newest 30 %
    of the run), which needs the rows of that whole window: the strip says which it is (:func:`envelope_system`)."""
    steps, waits = run.pyramid(STEP_TIME), run.pyramid(DATA_WAIT)
    if steps is None or waits is None:
        return None
    finest = steps.levels[min(steps.levels)]
    if not len(finest):
        return None
    last = int(finest.last_step[-1])
    recent = finest.between(last - RECENT_STEPS, last)
    first = int(recent.first_step.min())
    wait = waits.levels[min(waits.levels)].between(first, last)
    step_count, wait_count = recent.count.sum(), wait.count.sum()
    if not step_count or not wait_count:
        return None
    step_mean, wait_mean = recent.total.sum() / step_count, wait.total.sum() / wait_count
    return (float(wait_mean / step_mean) if step_mean > 0 else np.nan), last - first + 1


def envelope_system(run: EnvelopeRun, steps_per_s: float | None = None) -> tuple[tuple[str, str], ...]:
    """Steps/s (``steps_per_s``: the run's throughput as the overview shows it, from its tail summary), the
    data-wait share (:func:`recent_wait`, labelled as a mean over the steps it covers), device memory and GPU
    utilisation (the newest values), as labelled strings."""
    figures = []
    if steps_per_s is not None:
        figures.append(("steps/s", fmt(steps_per_s)))
    waiting = recent_wait(run)
    if waiting is not None and np.isfinite(waiting[0]):
        figures.append(("data wait", f"{waiting[0]:.0%} (mean, last {waiting[1]:,} steps)"))
    for name, label in MEMORY_FIGURES:
        value = last_value(run, name)
        if value is not None:
            figures.append((label, f"{value / 2**30:.1f} GiB"))
    util = last_value(run, SYS_GPU_UTIL)
    if util is not None:
        figures.append(("GPU", f"{util:.0f}%"))
    return tuple(figures)


def envelope_detail_data(run: EnvelopeRun, points: int, window: Window | None = None, dist: str | None = None,
                         steps_per_s: float | None = None) -> DetailData:
    """Charts, layer grid, events and system figures of ``run`` from its envelopes (``window``: a zoom; ``dist``:
    the distribution shown, default the first; ``steps_per_s``: the run's throughput, :func:`envelope_system`)."""
    loss = run.pyramid(LOSS)
    finest = loss.levels[min(loss.levels)] if loss is not None else None
    steps = (int(finest.first_step.min()), int(finest.last_step[-1])) if finest is not None and len(finest) else (0, 0)
    return DetailData(
        charts=marks_within(envelope_charts(run, points, window, dist), window),
        layers=envelope_layers(run, max(8, points // 4)),
        events=tuple(run.events[-MAX_EVENTS:]),
        system=envelope_system(run, steps_per_s),
        steps=steps,
        event_steps=frozenset(e.step for e in run.events),
        ranks=None,
        dists=distribution_names(run.metric_names, RunView(run).param_order),
    )
