"""A set of integers stored as sorted, merged intervals.

The reader remembers which flush sequence numbers it has already read. Runs can
have hundreds of thousands of flushes that arrive almost in order, so intervals
keep this tiny where a plain ``set`` would not be.
"""

from __future__ import annotations

import bisect

import numpy as np


class SeqSet:
    """Sorted disjoint inclusive intervals ``[start, end]`` of integers."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def __len__(self) -> int:
        return sum(e - s + 1 for s, e in zip(self._starts, self._ends))

    def covers(self, first: int, last: int) -> bool:
        """True when every integer in ``[first, last]`` is in the set."""
        i = bisect.bisect_right(self._starts, first) - 1
        return i >= 0 and self._ends[i] >= last

    def overlaps(self, first: int, last: int) -> bool:
        """True when any integer in ``[first, last]`` is in the set."""
        i = bisect.bisect_right(self._starts, last) - 1
        return i >= 0 and self._ends[i] >= first

    def held_within(self, first: int, last: int) -> list[tuple[int, int]]:
        """The inclusive ranges of ``[first, last]`` the set holds, from the intervals alone
        (nothing is allocated per integer, whatever the width of the range)."""
        lo = bisect.bisect_right(self._ends, first - 1)
        hi = bisect.bisect_right(self._starts, last)
        return [(max(s, first), min(e, last)) for s, e in zip(self._starts[lo:hi], self._ends[lo:hi])]

    def contains_mask(self, values: np.ndarray) -> np.ndarray:
        """Boolean mask of which ``values`` are in the set."""
        starts = np.asarray(self._starts, dtype=np.int64)
        ends = np.asarray(self._ends, dtype=np.int64)
        idx = np.searchsorted(starts, values, side="right") - 1
        valid = idx >= 0
        mask = np.zeros(len(values), dtype=bool)
        mask[valid] = ends[idx[valid]] >= values[valid]
        return mask

    def add_range(self, first: int, last: int) -> None:
        """Add every integer in ``[first, last]``, merging touching intervals."""
        lo = bisect.bisect_left(self._ends, first - 1)
        hi = bisect.bisect_right(self._starts, last + 1)
        if lo < hi:
            first = min(first, self._starts[lo])
            last = max(last, self._ends[hi - 1])
        self._starts[lo:hi] = [first]
        self._ends[lo:hi] = [last]

    def add_values(self, values: np.ndarray) -> None:
        """Add each distinct value of an integer array."""
        for value in np.unique(values).tolist():
            self.add_range(value, value)
