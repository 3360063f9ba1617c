"""Smoothing a chart's series: the debiased exponential moving average TensorBoard and W&B draw.

TensorBoard smooths the points it shows, one weight per point, and divides by
``1 - weight**n`` so the first points are not pulled towards zero. The points a
chart gets here are downsampled (and unevenly spaced: extremes are kept), so a
weight per point would smooth a run more the longer it gets. Like W&B's
time-weighted EMA, the weight is applied per 1/``VIEWPORT_POINTS`` of the
series' step range instead: on ``VIEWPORT_POINTS`` evenly spaced points it is
exactly TensorBoard's EMA, and the curve reads the same whatever the number of
points drawn. Works on (steps, values) arrays, whatever produced them.
"""

from __future__ import annotations

import math

import numpy as np

STRENGTHS = (0.0, 0.6, 0.9, 0.99)
"""The smoothing weights a key cycles through (0: off), as in TensorBoard's slider."""
VIEWPORT_POINTS = 1000
"""A weight applies per this fraction of the step range (TensorBoard shows up to 1000 points per series)."""


def ema(steps: np.ndarray, values: np.ndarray, weight: float) -> np.ndarray:
    """The debiased EMA of ``values`` at each point (same length); ``weight`` in [0, 1), 0 returns a copy.

    Each value is a weighted mean of the finite values up to it, so it lies between their minimum
    and maximum (a constant series stays exactly that constant). Non-finite values are skipped
    and give NaN at their own position. Any finite magnitude works (1e308 next to -1e308, subnormals).
    """
    x = np.asarray(steps, dtype=np.float64).reshape(-1)
    y = np.array(values, dtype=np.float64, copy=True).reshape(-1)
    n = min(len(x), len(y))
    x, y = x[:n], y[:n]
    if weight <= 0 or n == 0:
        return y
    weight = min(float(weight), 1 - 1e-12)
    finite = np.isfinite(y)
    out = np.full(n, np.nan)
    if not finite.any():
        return out
    xs = _unit_steps(x)
    mean = total = 0.0
    previous: float | None = None
    for i in range(n):
        if not finite[i]:
            continue
        here = float(xs[i])
        gap = 1.0 if previous is None or math.isnan(here) else max(0.0, here - previous) * VIEWPORT_POINTS
        previous = here if not math.isnan(here) else previous
        total = total * weight**gap + 1.0
        v = float(y[i])
        if total == 1.0:
            mean = v
        elif v != mean:
            share = 1.0 / total
            difference = v - mean
            moved = mean + difference * share if math.isfinite(difference) else mean * (1.0 - share) + v * share
            mean = min(max(moved, min(mean, v)), max(mean, v))  # rounding never leaves the range
        out[i] = mean
    return out


def _unit_steps(x: np.ndarray) -> np.ndarray:
    """Steps as fractions of their finite range (NaN where a step is not finite). Without two
    distinct finite steps, points are 1/``VIEWPORT_POINTS`` apart: one weight per point."""
    good = np.isfinite(x)
    if good.sum() < 2 or float(x[good].min()) == float(x[good].max()):
        return np.where(good, np.arange(len(x)) / VIEWPORT_POINTS, np.nan)
    lo, hi = float(x[good].min()), float(x[good].max())
    exponent = math.frexp(max(abs(lo), abs(hi)))[1]  # scaled below 1 first: the range cannot overflow
    low, high = math.ldexp(lo, -exponent), math.ldexp(hi, -exponent)
    return np.where(good, (np.ldexp(np.where(good, x, 0.0), -exponent) - low) / (high - low), np.nan)


def next_strength(current: float) -> float:
    """The strength after ``current`` in ``STRENGTHS`` (back to off after the strongest)."""
    later = [s for s in STRENGTHS if s > current]
    return later[0] if later else STRENGTHS[0]


def strength_label(weight: float) -> str:
    """How a chart title names the smoothing: ``EMA 0.9``, or empty when off."""
    return f"EMA {weight:g}" if weight > 0 else ""
