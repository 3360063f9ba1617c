"""Downsampling long series for charts while keeping their extremes.

A million-step run drawn on a 100-column chart must still show a single-step
spike: MinMaxLTTB (tsdownsample) keeps each bucket's minimum and maximum before
LTTB, so spikes survive. Non-finite values are dropped here and reported apart.
"""

from __future__ import annotations

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

from tuidiag.store.envelope import from_rows, zigzag
from tuidiag.store.tail_summary import tail_spark  # noqa: F401  (defined beside the summary the recorder keeps)

_DOWNSAMPLER = MinMaxLTTBDownsampler()


def downsample(steps: np.ndarray, values: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` finite (step, value) pairs that keep the series' extremes."""
    finite = np.isfinite(values)
    if not finite.all():
        steps, values = steps[finite], values[finite]
    if len(values) <= points or points < 4:
        return steps, values
    x = steps.astype(np.int64, copy=False)
    if np.any(np.diff(x) < 0):
        order = np.argsort(x, kind="stable")
        x, values = x[order], values[order]
    idx = _DOWNSAMPLER.downsample(x, values.astype(np.float64, copy=False), n_out=points)
    return x[idx], values[idx]


def minmax_points(steps: np.ndarray, values: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows as at most about ``points / 2`` step buckets, each drawn as its minimum and maximum
    (:func:`~tuidiag.store.envelope.zigzag`, as the envelope charts draw): every extreme is kept, the
    largest and the smallest value exactly. Non-finite values are left out."""
    if not len(steps):
        return np.empty(0, np.int64), np.empty(0, np.float64)
    span = int(np.max(steps)) - int(np.min(steps)) + 1
    shift = 0
    while span >> shift > max(1, points // 2):
        shift += 1
    return zigzag(from_rows(steps, values, shift))
