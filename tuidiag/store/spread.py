"""Evenly spread picks: which of ``count`` items to keep when at most ``points`` fit."""

from __future__ import annotations

import numpy as np


def spread_indices(count: int, points: int) -> np.ndarray:
    """At most ``points`` distinct indices of ``0..count-1``, increasing, evenly spread, the first and last
    included (pure). Not ``np.unique``: on an integer array it imports ``numpy.ma`` (about 20 ms, once per
    process), which the first frame of a run view paid."""
    if count <= 0:
        return np.empty(0, np.int64)
    pick = np.linspace(0, count - 1, max(2, points)).round().astype(np.int64)
    return pick[np.concatenate(([True], pick[1:] != pick[:-1]))]  # nondecreasing: repeats are neighbours
