"""Robust statistics over metric series: medians, MAD z-scores, windows, trends.

Rules use these rather than one-step comparisons so they are indifferent to noise,
to how often a metric is recorded and to the run's length.
"""

from __future__ import annotations

import numpy as np

MAD_TO_SIGMA = 1.4826


def finite(values: np.ndarray) -> np.ndarray:
    """The finite values only."""
    return values[np.isfinite(values)]


def median(values: np.ndarray, default: float = float("nan")) -> float:
    """Median of the finite values, ``default`` when there are none."""
    good = finite(values)
    return float(np.median(good)) if len(good) else default


def robust_sigma(values: np.ndarray) -> float:
    """Median absolute deviation scaled to a normal sigma (0 when too few values)."""
    good = finite(values)
    if len(good) < 3:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(good - np.median(good))))


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Centered rolling median (via pandas, which handles the edges)."""
    import pandas as pd

    return pd.Series(values).rolling(window, center=True, min_periods=1).median().to_numpy()


def log_slope(steps: np.ndarray, values: np.ndarray) -> float:
    """Slope of log10(value) per 1000 steps by least squares over positive finite values."""
    mask = np.isfinite(values) & (values > 0)
    if mask.sum() < 3 or np.ptp(steps[mask]) == 0:
        return 0.0
    return float(np.polyfit(steps[mask] / 1000.0, np.log10(values[mask]), 1)[0])


def fmt(value: float) -> str:
    """A number for evidence text: 3 significant digits, scientific when tiny or huge."""
    if not np.isfinite(value):
        return str(value)
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.3g}"
    return f"{value:.2e}"
