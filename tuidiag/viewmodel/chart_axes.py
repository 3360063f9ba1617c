"""Where a chart's points, lines and ticks go on screen, computed without plotext.

plotext keeps its state between builds and applies its own log scale to that
state in place, so building the same figure twice (a terminal resize) took the
log of a log and raised. Nothing here hands plotext a log scale or raw
magnitudes: values are log-transformed on a copy (non-positive ones dropped and
counted), non-finite ones dropped and counted, and both axes are mapped onto
[0, 1], with tick labels written from the real values. Whatever the data
(1e300, 1e-300, constant, one point), plotext only sees finite numbers in [0, 1].
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.snapshot import Chart

NONFINITE, ACTION, FAILED_ACTION, RESUME, MARKER = "nonfinite", "action", "failed_action", "resume", "marker"
"""Kinds of vertical line: the first non-finite step, a live action, the cursor or chosen step."""


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


def plot_data(chart: Chart, log: bool, marker: int | None = None, x_ticks: int = 5, y_ticks: int = 5) -> PlotData | None:
    """``chart`` in unit coordinates on a linear or log y axis; None when no point can be drawn."""
    kept: list[tuple[str, np.ndarray, np.ndarray]] = []
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
        kept.append((label, x, np.log10(y) if log else y))
    if not any(len(x) for _, x, _ in kept):
        return None
    threshold = _scaled(chart.threshold, log)
    vlines = [(float(s), NONFINITE) for s in chart.nonfinite_steps[:1]] + [(float(s), ACTION) for s in chart.actions]
    vlines += [(float(s), FAILED_ACTION) for s in chart.failed_actions] + [(float(s), RESUME) for s in chart.resumes]
    if marker is not None:
        vlines.append((float(marker), MARKER))
    vlines = [(s, kind) for s, kind in vlines if math.isfinite(s)]
    xs = np.concatenate([x for _, x, _ in kept] + [np.array([s for s, _ in vlines])])
    ys = np.concatenate([y for _, _, y in kept] + ([np.array([threshold])] if threshold is not None else []))
    x_lo, x_hi, y_lo, y_hi = float(xs.min()), float(xs.max()), float(ys.min()), float(ys.max())
    return PlotData(
        lines=tuple((label, unit(x, x_lo, x_hi), unit(y, y_lo, y_hi)) for label, x, y in kept),
        threshold=None if threshold is None else float(unit(np.array([threshold]), y_lo, y_hi)[0]),
        vlines=tuple((float(unit(np.array([s]), x_lo, x_hi)[0]), kind) for s, kind in vlines),
        x_axis=step_axis(x_lo, x_hi, x_ticks),
        y_axis=log_axis(y_lo, y_hi, y_ticks) if log else linear_axis(y_lo, y_hi, y_ticks),
        log=log,
        hidden_nonpositive=hidden,
        dropped_nonfinite=dropped,
    )


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


def linear_axis(lo: float, hi: float, count: int) -> Axis:
    """``count`` evenly spaced ticks from lo to hi; one tick when the range is flat."""
    if not hi > lo:
        return Axis((0.5,), (fmt(lo),))
    fractions = np.linspace(0.0, 1.0, max(2, count))
    return Axis(tuple(float(f) for f in fractions), distinct_labels([float(v) for v in _between(lo, hi, fractions)]))


def log_axis(lo: float, hi: float, count: int) -> Axis:
    """Ticks on an axis of log10 values: the decades inside the range (at most ``count``),
    or evenly spaced ticks labelled with the real values when fewer than two decades fit."""
    if not hi > lo:
        return Axis((0.5,), (fmt(exp10(lo)),))
    decades = list(range(math.ceil(lo), math.floor(hi) + 1))
    if len(decades) >= 2:
        stride = math.ceil(len(decades) / max(2, count))
        picked = decades[::stride]
        positions = unit(np.array(picked, dtype=np.float64), lo, hi)
        return Axis(tuple(float(p) for p in positions), tuple(f"{exp10(d):g}" for d in picked))
    fractions = np.linspace(0.0, 1.0, max(2, count))
    return Axis(tuple(float(f) for f in fractions), distinct_labels([exp10(float(v)) for v in _between(lo, hi, fractions)]))


def _step_label(value: float) -> str:
    return f"{value:.0f}" if value.is_integer() and abs(value) < 1e15 else fmt(value)


def step_axis(lo: float, hi: float, count: int) -> Axis:
    """x ticks: evenly spaced, on whole steps when the range allows (labels say exactly where they are)."""
    if not hi > lo:
        return Axis((0.5,), (_step_label(lo),))
    values = _between(lo, hi, np.linspace(0.0, 1.0, max(2, count)))
    if lo.is_integer() and hi.is_integer() and abs(hi) < 1e15 and abs(lo) < 1e15:
        values = np.unique(np.round(values)) if hi - lo >= count else np.arange(lo, hi + 1)
    positions = unit(values, lo, hi)
    return Axis(tuple(float(p) for p in positions), distinct_labels([float(v) for v in values], _step_label))
