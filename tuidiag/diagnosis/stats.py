"""Robust statistics over metric series: medians, MAD z-scores, windows, trends.

Rules use these rather than one-step comparisons so they are indifferent to noise,
to how often a metric is recorded and to the run's length.
"""

from __future__ import annotations

import warnings

import numpy as np

MAD_TO_SIGMA = 1.4826
SAMPLE_LIMIT = 100_000
"""Medians of longer series are taken over an evenly strided sample of about this many values."""


def finite(values: np.ndarray) -> np.ndarray:
    """The finite values only."""
    return values[np.isfinite(values)]


def thin(values: np.ndarray, limit: int = SAMPLE_LIMIT) -> np.ndarray:
    """Every k-th value so that about ``limit`` remain (the array itself when it is short enough)."""
    return values if len(values) <= limit else values[:: -(-len(values) // limit)]


def median(values: np.ndarray, default: float = float("nan")) -> float:
    """Median of the finite values, ``default`` when there are none (strided sample beyond 100k values)."""
    good = finite(thin(values))
    return float(np.median(good)) if len(good) else default


def robust_sigma(values: np.ndarray) -> float:
    """Median absolute deviation scaled to a normal sigma (0 when too few values)."""
    good = finite(thin(values))
    if len(good) < 3:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(good - np.median(good))))


def column_medians(rows: np.ndarray) -> np.ndarray:
    """The median of the finite values of each column of ``rows`` (NaN for a column with none), vectorised."""
    rows = np.asarray(rows, dtype=float)
    finite_rows = np.isfinite(rows)
    if finite_rows.all():
        return np.median(rows, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column has a NaN median
        return np.nanmedian(np.where(finite_rows, rows, np.nan), axis=0)


def grouped_median(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ``keys`` in order, the median of the finite ``values`` of each; NaN for a key with none).

    Vectorised (one sort), where a median per key in a loop would take a second on a long run.
    """
    keys, values = np.asarray(keys), np.asarray(values, dtype=float)
    distinct, inverse = np.unique(keys, return_inverse=True)
    medians = np.full(len(distinct), np.nan)
    ok = np.isfinite(values)
    group, good = inverse.reshape(-1)[ok], values[ok]
    order = np.lexsort((good, group))
    group, good = group[order], good[order]
    counts = np.bincount(group, minlength=len(distinct))
    starts = np.cumsum(counts) - counts
    has = counts > 0
    lo, hi = (starts + (counts - 1) // 2)[has], (starts + counts // 2)[has]
    medians[has] = np.where(lo == hi, good[lo], (good[lo] + good[hi]) / 2)
    return distinct, medians


def block_medians(values: np.ndarray, blocks: int) -> np.ndarray:
    """Medians of ``blocks`` consecutive, equal chunks of ``values`` (the tail beyond a whole chunk is dropped).

    Vectorised (one reshape, one ``nanmedian``), so it smooths a million-step series
    in milliseconds where a rolling median would take seconds.
    """
    values = thin(values, SAMPLE_LIMIT)
    n = len(values)
    blocks = max(1, min(blocks, n))
    size = n // blocks
    if size == 0:
        return np.empty(0)
    chunks = values[n - size * blocks :].reshape(blocks, size)
    if np.isfinite(chunks).all():
        return np.median(chunks, axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN chunk has a NaN median
        return np.nanmedian(chunks, axis=1)


def local_baseline(values: np.ndarray, size: int) -> np.ndarray:
    """Per element, the median of its chunk of ``size`` neighbours (a cheap stand-in for a rolling median).

    ``values`` must be finite.
    """
    n = len(values)
    if n == 0:
        return np.empty(0)
    size = max(1, min(size, n))
    whole = (n // size) * size
    medians = np.median(values[:whole].reshape(-1, size), axis=1) if whole else np.empty(0)
    if whole < n:
        medians = np.append(medians, np.median(values[whole:]))
    return np.repeat(medians, size)[:n]
