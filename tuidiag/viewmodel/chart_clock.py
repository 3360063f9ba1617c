"""Wall-clock time for a chart's x axis: seconds since the run's first recorded step.

A chart carries a small clock, (steps, elapsed seconds) sampled from the loss rows'
wall times, and draws any series against time by interpolating its steps on it.
"""

from __future__ import annotations

import numpy as np

from tuidiag.store.spread import spread_indices

Clock = tuple[np.ndarray, np.ndarray]
"""(steps increasing, seconds since the first step) at sampled points of a run."""


def clock_of(steps: np.ndarray, walls: np.ndarray, points: int) -> Clock | None:
    """At most ``points`` (step, elapsed) pairs of a series' steps and wall times; None without two
    finite, distinct steps (nothing to interpolate on)."""
    x = np.asarray(steps, dtype=np.float64).reshape(-1)
    t = np.asarray(walls, dtype=np.float64).reshape(-1)
    n = min(len(x), len(t))
    good = np.isfinite(x[:n]) & np.isfinite(t[:n])
    x, t = x[:n][good], t[:n][good]
    if len(x) < 2:
        return None
    order = np.argsort(x, kind="stable")
    x, t = x[order], t[order]
    x, first = np.unique(x, return_index=True)  # one time per step: its first recording
    t = t[first]
    if len(x) < 2:
        return None
    pick = spread_indices(len(x), points)
    return x[pick], t[pick] - t[0]


def elapsed_at(clock: Clock, steps: np.ndarray) -> np.ndarray:
    """Seconds since the first step at each of ``steps`` (interpolated; held flat outside the clock)."""
    return np.interp(np.asarray(steps, dtype=np.float64), clock[0], clock[1])
