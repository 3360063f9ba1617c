"""Where a chart's points, lines and ticks go on screen, computed without plotext.

plotext keeps its state between builds and applies its own log scale to that
state in place, so building the same figure twice (a terminal resize) took the
log of a log and raised. Nothing here hands plotext a log scale or raw
magnitudes: values are log-transformed on a copy (non-positive ones dropped and
counted), non-finite ones dropped and counted, and both axes are mapped onto
[0, 1], with tick labels written from the real values. Whatever the data
(1e300, 1e-300, constant, one point), plotext only sees finite numbers in [0, 1].

The x axis is the step, or the wall-clock time since the first step when the chart
carries a clock; smoothing (an EMA of the drawn points) and the cursor are placed
on the same axes. Tick values come from :mod:`tuidiag.viewmodel.chart_ticks`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.chart_clock import elapsed_at
from tuidiag.viewmodel.chart_smoothing import ema
from tuidiag.viewmodel.chart_ticks import duration_labels, duration_ticks, integer_ticks, linear_ticks, log_ticks, step_label, time_label
from tuidiag.viewmodel.snapshot import Chart

NONFINITE, ACTION, FAILED_ACTION, RESUME, MARKER = "nonfinite", "action", "failed_action", "resume", "marker"
"""Kinds of vertical line: the first non-finite step, a live action, a resumed session, the replay or chosen step."""
STEP, TIME = "step", "time"
"""What the x axis shows: the step, or the wall-clock time since the first step."""


@dataclass(frozen=True)
class Axis:
    """Tick positions in [0, 1] and their labels (written from the real values)."""

    ticks: tuple[float, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class PlotData:
    """A chart ready for plotext: every coordinate is finite and in [0, 1].

    ``lines`` keeps one entry per input line (possibly empty), so colours stay with their line.
    """

    lines: tuple[tuple[str, np.ndarray, np.ndarray], ...]
    threshold: float | None
    vlines: tuple[tuple[float, str], ...]
    x_axis: Axis
    y_axis: Axis
    log: bool
    hidden_nonpositive: int
    """Finite values at or below zero, left out of a log axis."""
    dropped_nonfinite: int
    """Points whose step or value is NaN or infinite (the snapshot reports those apart)."""
    smoothed: tuple[np.ndarray | None, ...] = ()
    """Per line: the y of its EMA at the line's own x (unit coordinates), or None when not smoothed."""
    cursor: float | None = None
    """Where the cursor's vertical line goes (unit x), or None."""
    x_name: str = STEP
    """What the x axis shows (``STEP`` or ``TIME``)."""
    points: tuple[tuple[np.ndarray, np.ndarray, np.ndarray | None], ...] = ()
    """Per line, in real units: the steps and values drawn, and their EMA (None when not smoothed)."""
    y_ends: Axis = Axis((), ())
    """Two y ticks at the ends of the range, for a chart too short for two round values apart."""


def plot_data(chart: Chart, log: bool, marker: int | None = None, x_ticks: int = 5, y_ticks: int = 5, *,
              smoothing: float = 0.0, time_axis: bool = False, cursor: int | None = None) -> PlotData | None:
    """``chart`` in unit coordinates on a linear or log y axis; None when no point can be drawn.

    ``smoothing``: the EMA weight of each line's drawn points (0: none); ``time_axis``: x is the time
    since the first step (when the chart has a clock); ``cursor``: a step to mark."""
    kept: list[tuple[str, np.ndarray, np.ndarray]] = []
    smooth: list[np.ndarray | None] = []
    points: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
    hidden = dropped = 0
    for label, x, y in chart.lines:
        x, y = _floats(x), _floats(y)
        n = min(len(x), len(y))
        x, y = x[:n], y[:n]
        finite = np.isfinite(x) & np.isfinite(y)
        dropped += int(n - finite.sum())
        if log:
            positive = finite & (y > 0)
            hidden += int((finite & ~positive).sum())
            finite = positive
        x, y = x[finite], y[finite]
        smoothed = ema(x, y, smoothing) if smoothing > 0 and len(y) else None
        points.append((x, y, smoothed))
        kept.append((label, x, np.log10(y) if log else y))
        smooth.append(None if smoothed is None else np.log10(smoothed) if log else smoothed)
    if not any(len(x) for _, x, _ in kept):
        return None
    to_x = _x_map(chart, time_axis)
    kept = [(label, to_x(x), y) for label, x, y in kept]
    threshold = _scaled(chart.threshold, log)
    vlines = [(float(s), NONFINITE) for s in chart.nonfinite_steps[:1]] + [(float(s), ACTION) for s in chart.actions]
    vlines += [(float(s), FAILED_ACTION) for s in chart.failed_actions] + [(float(s), RESUME) for s in chart.resumes]
    if marker is not None:
        vlines.append((float(marker), MARKER))
    if chart.window is not None:  # a zoom: what lies outside it is not drawn, nor widens the step axis
        lo, hi = chart.window
        vlines = [(s, kind) for s, kind in vlines if lo <= s <= hi]
        cursor = cursor if cursor is None or lo <= cursor <= hi else None
    vlines = [(float(to_x(np.array([s]))[0]), kind) for s, kind in vlines if math.isfinite(s)]
    at = None if cursor is None else float(to_x(np.array([float(cursor)]))[0])
    xs = np.concatenate([x for _, x, _ in kept] + [np.array([s for s, _ in vlines])] + ([np.array([at])] if at is not None else []))
    xs = xs[np.isfinite(xs)]
    ys = np.concatenate([y for _, _, y in kept] + ([np.array([threshold])] if threshold is not None else []))
    x_lo, x_hi, y_lo, y_hi = float(xs.min()), float(xs.max()), float(ys.min()), float(ys.max())
    name = TIME if time_axis and chart.clock is not None else STEP
    return PlotData(
        lines=tuple((label, unit(x, x_lo, x_hi), unit(y, y_lo, y_hi)) for label, x, y in kept),
        threshold=None if threshold is None else float(unit(np.array([threshold]), y_lo, y_hi)[0]),
        vlines=tuple((float(unit(np.array([s]), x_lo, x_hi)[0]), kind) for s, kind in vlines if math.isfinite(s)),
        x_axis=time_axis_ticks(x_lo, x_hi, x_ticks) if name == TIME else step_axis(x_lo, x_hi, x_ticks),
        y_axis=log_axis(y_lo, y_hi, y_ticks) if log else linear_axis(y_lo, y_hi, y_ticks),
        log=log,
        hidden_nonpositive=hidden,
        dropped_nonfinite=dropped,
        smoothed=tuple(None if y is None else unit(y, y_lo, y_hi) for y in smooth),
        cursor=None if at is None or not math.isfinite(at) else float(unit(np.array([at]), x_lo, x_hi)[0]),
        x_name=name,
        points=tuple(points),
        y_ends=_evenly(y_lo, y_hi, 2, (lambda v: fmt(exp10(v))) if log else fmt) if y_hi > y_lo else Axis((), ()),
    )


def _x_map(chart: Chart, time_axis: bool) -> Callable[[np.ndarray], np.ndarray]:
    """Steps to x axis values: unchanged, or seconds since the first step on the chart's clock."""
    clock = chart.clock
    if not time_axis or clock is None:
        return lambda steps: steps
    return lambda steps: elapsed_at(clock, steps)


def _floats(values: object) -> np.ndarray:
    """A float64 copy of ``values`` as a flat array (the chart's own arrays are never touched)."""
    return np.array(values, dtype=np.float64, copy=True).reshape(-1)


def _scaled(value: float | None, log: bool) -> float | None:
    """A threshold on the drawn axis, or None when it cannot be drawn there."""
    if value is None or not math.isfinite(value) or (log and value <= 0):
        return None
    return math.log10(value) if log else float(value)


def unit(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``values`` in [lo, hi] mapped onto [0, 1] without overflow or underflow; a flat range maps to 0.5.

    Everything is first scaled by a power of two (exact) so the largest magnitude is
    below 1: ``hi - lo`` can no longer overflow (1e308 - -1e308) or vanish (subnormals).
    """
    if not hi > lo:
        return np.full(len(values), 0.5)
    exponent = math.frexp(max(abs(lo), abs(hi)))[1]
    v, low, high = (np.ldexp(np.asarray(a, dtype=np.float64), -exponent) for a in (values, lo, hi))
    return np.clip((v - low) / (high - low), 0.0, 1.0)


def _between(lo: float, hi: float, fractions: np.ndarray) -> np.ndarray:
    """Values at ``fractions`` of the way from lo to hi (no overflow for any finite lo, hi)."""
    return lo * (1 - fractions) + hi * fractions


def exp10(value: float) -> float:
    """``10 ** value`` for a tick label; the largest float where ``**`` would raise OverflowError
    (log10 of the largest float, rounded up, is just past it)."""
    return min(10.0 ** (value - 1) * 10.0, sys.float_info.max)


def distinct_labels(values: list[float], label: Callable[[float], str] = fmt) -> tuple[str, ...]:
    """Labels for ticks: ``label`` (3 significant digits), with more digits when two would read the same."""
    labels = tuple(label(v) for v in values)
    digits = 4
    while len(set(labels)) < len(set(values)) and digits <= 15:
        labels = tuple(f"{v:.{digits}g}" for v in values)
        digits += 1
    return labels


def _evenly(lo: float, hi: float, count: int, label: Callable[[float], str] = fmt) -> Axis:
    """``count`` evenly spaced ticks from lo to hi, when no round values fit (awkward or huge ranges)."""
    fractions = np.linspace(0.0, 1.0, max(2, count))
    return Axis(tuple(float(f) for f in fractions), distinct_labels([float(v) for v in _between(lo, hi, fractions)], label))


def _at(values: list[float], lo: float, hi: float, label: Callable[[float], str]) -> Axis:
    """Ticks at ``values`` (inside [lo, hi]) with their labels."""
    positions = unit(np.array(values, dtype=np.float64), lo, hi)
    return Axis(tuple(float(p) for p in positions), distinct_labels(values, label))


def linear_axis(lo: float, hi: float, count: int) -> Axis:
    """Up to ``count`` ticks on round values from lo to hi; one tick when the range is flat."""
    if not hi > lo:
        return Axis((0.5,), (fmt(lo),))
    values = linear_ticks(lo, hi, count)
    return _at(values, lo, hi, fmt) if values else _evenly(lo, hi, count)


def log_axis(lo: float, hi: float, count: int) -> Axis:
    """Ticks on an axis of log10 values, labelled with the real values: the decades inside the range
    (every n-th when many), or 1-2-5 times a power of ten when fewer than two decades fit."""
    if not hi > lo:
        return Axis((0.5,), (fmt(exp10(lo)),))
    values = log_ticks(lo, hi, count)
    if not values:
        return _evenly(lo, hi, count, lambda v: fmt(exp10(v)))
    decades = all(float(v).is_integer() for v in values)
    positions = unit(np.array(values, dtype=np.float64), lo, hi)
    labels = tuple(decade_label(int(v)) for v in values) if decades else distinct_labels([exp10(v) for v in values])
    return Axis(tuple(float(p) for p in positions), labels)


def decade_label(exponent: int) -> str:
    """``10 ** exponent`` as a tick label: plain from 0.001 to 10000, else ``1e-5``, ``1e22``."""
    return f"{10.0 ** exponent:g}" if -3 <= exponent <= 4 else f"1e{exponent}"


def step_axis(lo: float, hi: float, count: int) -> Axis:
    """x ticks on whole, round steps (``0 250 500``, ``1.5M``); evenly spaced where floats skip integers."""
    if not hi > lo:
        return Axis((0.5,), (step_label(lo),))
    values = integer_ticks(lo, hi, count)
    return _at(values, lo, hi, step_label) if values else _evenly(lo, hi, count, step_label)


def time_axis_ticks(lo: float, hi: float, count: int) -> Axis:
    """x ticks on round durations since the first step (``0s 5m 10m``)."""
    if not hi > lo:
        return Axis((0.5,), (time_label(lo),))
    values = duration_ticks(lo, hi, count)
    if not values:
        return _evenly(lo, hi, count, time_label)
    return Axis(tuple(float(p) for p in unit(np.array(values, dtype=np.float64), lo, hi)), duration_labels(values))
