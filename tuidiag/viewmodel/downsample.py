"""Downsampling long series for charts while keeping their extremes.

A million-step run drawn on a 100-column chart must still show a single-step
spike: MinMaxLTTB (tsdownsample) keeps each bucket's minimum and maximum before
LTTB, so spikes survive. Non-finite values are dropped here and reported apart.
"""

from __future__ import annotations

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

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
