"""Min/max envelopes of a series at several resolutions: buckets of ``2**shift`` steps (a pyramid).

A :class:`Level` holds, for each bucket ``step >> shift`` that has rows, the count
of finite values, their minimum, maximum, sum and smallest positive value, the
count and first step of non-finite values, the first step, and the row the reader
orders last (the highest step; of rows at that step, the last written). Every
field combines exactly, so a coarser level is computed from a finer one
(:func:`coarsen`), and the parts of one bucket found in several shards merge
(:func:`merge`, given in write order). A chart draws the level whose buckets
match its width; the minimum and maximum of every bucket are kept, never a
sample, so a one-step spike shows at every zoom.

Pure numpy: no files here (:mod:`tuidiag.store.summary_files` stores levels beside
the shards; :mod:`tuidiag.store.envelope_run` reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

BASE_SHIFT = 8
"""The finest stored level: buckets of 256 steps. Finer views read the rows themselves."""
SHIFT_STEP = 2
"""Each stored level's buckets are ``2**SHIFT_STEP`` times wider than the one below."""
MAX_SHIFT = 62
"""Steps are int64: no bucket is wider than ``2**62`` steps."""
NO_STEP = np.iinfo(np.int64).max
"""``first_bad`` of a bucket without non-finite values."""

@dataclass(frozen=True)
class Level:
    """One series at one resolution: one entry per non-empty bucket, sorted by bucket."""

    shift: int
    bucket: np.ndarray
    count: np.ndarray
    """Finite values in the bucket."""
    bad: np.ndarray
    """Non-finite values (NaN, +-inf) in the bucket."""
    lo: np.ndarray
    """Smallest finite value (NaN when none)."""
    hi: np.ndarray
    """Largest finite value (NaN when none)."""
    total: np.ndarray
    """Sum of the finite values (the mean is ``total / count``)."""
    lo_pos: np.ndarray
    """Smallest finite value above zero (NaN when none): what a log axis can show."""
    first_step: np.ndarray
    first_bad: np.ndarray
    """First step with a non-finite value (:data:`NO_STEP` when none)."""
    last_step: np.ndarray
    last_value: np.ndarray
    """The value of the row the reader orders last in the bucket (may be non-finite)."""

    def __len__(self) -> int:
        return len(self.bucket)

    @property
    def rows(self) -> int:
        """Rows summarised."""
        return int(self.count.sum() + self.bad.sum())

    @property
    def mean(self) -> np.ndarray:
        """Mean of each bucket's finite values (NaN when none)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.total / np.maximum(self.count, 1), np.nan)

    def take(self, index: np.ndarray | slice) -> "Level":
        """The buckets at ``index`` (a mask, indices or a slice)."""
        return Level(self.shift, *(getattr(self, name)[index] for name in _ARRAYS))

    def between(self, lo_step: int, hi_step: int) -> "Level":
        """The buckets that hold any step in ``[lo_step, hi_step]``."""
        a = int(np.searchsorted(self.bucket, lo_step >> self.shift, side="left"))
        b = int(np.searchsorted(self.bucket, hi_step >> self.shift, side="right"))
        return self.take(slice(a, b))


_ARRAYS = tuple(f.name for f in fields(Level) if f.name != "shift")


def empty(shift: int) -> Level:
    """A level without buckets."""
    ints, floats = np.empty(0, np.int64), np.empty(0, np.float64)
    return Level(shift, ints, ints, ints, floats, floats, floats, floats, ints, ints, ints, floats)


def from_rows(steps: np.ndarray, values: np.ndarray, shift: int = BASE_SHIFT) -> Level:
    """The level of rows given in write order (steps in any order)."""
    steps = np.asarray(steps, np.int64)
    values = np.asarray(values, np.float64)
    if not len(steps):
        return empty(shift)
    position = np.arange(len(steps))
    order = np.lexsort((position, steps))  # by step, then write order: the last of a bucket is its reader-last row
    steps, values = steps[order], values[order]
    buckets = steps >> shift
    starts = np.flatnonzero(np.concatenate(([True], buckets[1:] != buckets[:-1])))
    ends = np.append(starts[1:], len(steps)) - 1
    finite = np.isfinite(values)
    bad_steps = np.where(finite, NO_STEP, steps)
    return Level(
        shift=shift,
        bucket=buckets[starts],
        count=np.add.reduceat(finite.astype(np.int64), starts),
        bad=np.add.reduceat((~finite).astype(np.int64), starts),
        lo=_nan_empty(np.minimum.reduceat(np.where(finite, values, np.inf), starts)),
        hi=_nan_empty(np.maximum.reduceat(np.where(finite, values, -np.inf), starts)),
        total=np.add.reduceat(np.where(finite, values, 0.0), starts),
        lo_pos=_nan_empty(np.minimum.reduceat(np.where(finite & (values > 0), values, np.inf), starts)),
        first_step=steps[starts],
        first_bad=np.minimum.reduceat(bad_steps, starts),
        last_step=steps[ends],
        last_value=values[ends],
    )


def _nan_empty(extremes: np.ndarray) -> np.ndarray:
    """Infinite minima/maxima of buckets without a (positive) finite value become NaN."""
    return np.where(np.isinf(extremes), np.nan, extremes)


def merge(parts: list[Level]) -> Level:
    """One level from levels of the same shift, given in write order (buckets split across shards merge)."""
    shift = parts[0].shift if parts else BASE_SHIFT
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty(shift)
    if len(parts) == 1:
        return parts[0]
    joined = _concat(parts)
    part = np.concatenate([np.full(len(p), i, np.int64) for i, p in enumerate(parts)])
    return _combine(joined, np.lexsort((part, joined.last_step, joined.bucket)), joined.bucket, shift)


def coarsen(level: Level, shift: int) -> Level:
    """``level`` at the coarser ``shift`` (buckets ``2**(shift - level.shift)`` times wider)."""
    if shift < level.shift:
        raise ValueError(f"cannot make buckets of 2**{level.shift} steps finer ({shift})")
    if not len(level):
        return empty(shift)
    groups = level.bucket >> (shift - level.shift)
    return _combine(level, np.arange(len(level)), groups, shift)  # finer buckets are disjoint and sorted: the last is last


def _combine(level: Level, order: np.ndarray, groups: np.ndarray, shift: int) -> Level:
    """Combine the entries of ``level`` taken in ``order`` (sorted by group, the reader-last entry of a group last)."""
    groups = groups[order]
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    ends = np.append(starts[1:], len(groups)) - 1
    taken = level.take(order)
    with np.errstate(invalid="ignore"):
        return Level(
            shift=shift,
            bucket=groups[starts],
            count=np.add.reduceat(taken.count, starts),
            bad=np.add.reduceat(taken.bad, starts),
            lo=_nan_empty(np.minimum.reduceat(np.where(np.isnan(taken.lo), np.inf, taken.lo), starts)),
            hi=_nan_empty(np.maximum.reduceat(np.where(np.isnan(taken.hi), -np.inf, taken.hi), starts)),
            total=np.add.reduceat(taken.total, starts),
            lo_pos=_nan_empty(np.minimum.reduceat(np.where(np.isnan(taken.lo_pos), np.inf, taken.lo_pos), starts)),
            first_step=np.minimum.reduceat(taken.first_step, starts),
            first_bad=np.minimum.reduceat(taken.first_bad, starts),
            last_step=taken.last_step[ends],
            last_value=taken.last_value[ends],
        )


def _concat(parts: list[Level]) -> Level:
    return Level(parts[0].shift, *(np.concatenate([getattr(p, name) for p in parts]) for name in _ARRAYS))


@dataclass
class Pyramid:
    """All stored levels of one series, finest first; grown in place as rows arrive (:meth:`extend`)."""

    levels: dict[int, Level]

    @classmethod
    def of(cls, base: Level) -> "Pyramid":
        """The pyramid over a base level (of :data:`BASE_SHIFT`)."""
        pyramid = cls({base.shift: base})
        pyramid._grow(base.shift)
        return pyramid

    def extend(self, new: Level) -> None:
        """Add the rows summarised in ``new`` (a base level of rows written after those already in): the base
        level's buckets from the first one ``new`` touches are merged, and each coarser level recomputed from there."""
        if not len(new):
            return
        if new.shift > min(self.levels):
            self.trim(new.shift)
        shift = min(self.levels)
        if new.shift != shift:
            new = coarsen(new, shift)
        first = int(new.bucket[0])  # sorted: the first bucket the new rows touch
        for s in sorted(self.levels):
            level = self.levels[s]
            touched = first >> (s - shift)
            cut = int(np.searchsorted(level.bucket, touched, side="left"))
            if s == shift:
                tail = merge([level.take(slice(cut, None)), new])
            else:
                finer = self.levels[s - SHIFT_STEP]
                tail = coarsen(finer.take(slice(int(np.searchsorted(finer.bucket, touched << SHIFT_STEP)), None)), s)
            self.levels[s] = _concat([level.take(slice(0, cut)), tail])
        self._grow(max(self.levels))

    def trim(self, floor: int) -> None:
        """Keep the levels from ``floor`` up only (computed from the finest when ``floor`` was not stored)."""
        finest = min(self.levels)
        if finest >= floor:
            return
        base = self.levels[floor] if floor in self.levels else coarsen(self.levels[finest], floor)
        self.levels = {floor: base}
        self._grow(floor)

    def _grow(self, top: int) -> None:
        """Add coarser levels until one bucket holds every step."""
        level = self.levels[top]
        while len(level) > 1 and level.shift + SHIFT_STEP <= MAX_SHIFT:
            level = coarsen(level, level.shift + SHIFT_STEP)
            self.levels[level.shift] = level

    def level_for(self, span: int, points: int) -> Level:
        """The finest level with at most about ``points`` buckets over ``span`` steps (the coarsest if none is that coarse)."""
        for shift in sorted(self.levels):
            if span >> shift <= points:
                return self.levels[shift]
        return self.levels[max(self.levels)]

    def extremes(self, lo_step: int, hi_step: int) -> tuple[float, float]:
        """(min, max) of the finite values at steps in ``[lo_step, hi_step)``, both multiples of the finest
        bucket width; each level answers the part of the range it covers whole (NaN, NaN when none)."""
        shift = min(self.levels)
        a, b = lo_step >> shift, hi_step >> shift
        lows, highs = [np.inf], [-np.inf]
        while a < b and shift in self.levels:
            level, width = self.levels[shift], 1 << SHIFT_STEP
            up, down = -(-a // width) * width, (b // width) * width
            edges = [(a, b)] if up >= down or shift + SHIFT_STEP not in self.levels else [(a, up), (down, b)]
            for x, y in edges:
                i, j = np.searchsorted(level.bucket, [x, y], side="left")
                if j > i:
                    lows.append(float(np.nanmin(level.lo[i:j], initial=np.inf)))
                    highs.append(float(np.nanmax(level.hi[i:j], initial=-np.inf)))
            if len(edges) == 1:
                break
            a, b, shift = up // width, down // width, shift + SHIFT_STEP
        low, high = min(lows), max(highs)
        return (low, high) if low <= high else (np.nan, np.nan)


def zigzag(level: Level) -> tuple[np.ndarray, np.ndarray]:
    """Points that draw every bucket's whole range: per bucket (first step, min) and (last step, max), in
    the order that continues from the bucket before, then the reader-last row. Non-finite values are left out
    (charts mark them apart); a bucket of one value gives one point."""
    keep = level.count > 0
    if not keep.any():
        return np.empty(0, np.int64), np.empty(0, np.float64)
    level = level.take(keep)
    n = len(level)
    rising = np.ones(n, bool)
    rising[1:] = level.lo[1:] >= level.hi[:-1] - (level.hi[:-1] - level.lo[:-1]) / 2  # go low-then-high when coming from below
    first_y = np.where(rising, level.lo, level.hi)
    second_y = np.where(rising, level.hi, level.lo)
    x = np.column_stack([level.first_step, level.last_step]).reshape(-1)
    y = np.column_stack([first_y, second_y]).reshape(-1)
    single = np.repeat(level.lo == level.hi, 2)
    single[0::2] = False  # a flat bucket keeps its first point only
    x, y = x[~single], y[~single]
    last = level.last_value[-1]
    if np.isfinite(last) and (y[-1] != last or x[-1] != level.last_step[-1]):
        x, y = np.append(x, level.last_step[-1]), np.append(y, last)
    return x, y
