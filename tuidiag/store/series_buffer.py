"""The in-memory side of a run: one growable buffer per metric, handed out as read-only ``Series``.

Buffers grow by doubling, so tailing a run appends in amortised constant time;
``Series`` views share the buffers' memory and are replaced, never mutated, when
new rows arrive. No torch, no UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tuidiag.store.decode import Chunk


@dataclass(frozen=True)
class Series:
    """One metric of one rank: steps, values and wall times, ordered by step."""

    steps: np.ndarray
    values: np.ndarray
    wall_times: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def last(self) -> float | None:
        """The newest value, or ``None`` for an empty series."""
        return float(self.values[-1]) if len(self.values) else None


class _Column:
    """A growable array. Views of its first ``n`` items stay valid while it grows.

    Several buffers may share one column (metrics recorded together have equal
    steps and wall times); a buffer writes past the end of a column only when it is
    as long as the column, and copies it (``fork``) otherwise.
    """

    __slots__ = ("data", "n")

    def __init__(self, dtype: Any) -> None:
        self.data = np.empty(0, dtype)
        self.n = 0

    def extend(self, parts: list[np.ndarray], reserve: int = 0) -> None:
        """Append ``parts``, growing to at least ``reserve`` items (else by half: amortised)."""
        need = self.n + sum(len(p) for p in parts)
        dtype = np.result_type(self.data.dtype, *(p.dtype for p in parts))
        if need > len(self.data) or dtype != self.data.dtype:
            by_half = len(self.data) + len(self.data) // 2 if self.n else 0
            try:
                grown = np.empty(max(need, reserve, by_half), dtype)
            except (MemoryError, ValueError):  # a reservation is a hint from file footers: grow by what arrived instead
                grown = np.empty(max(need, by_half), dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        for part in parts:
            self.data[self.n : self.n + len(part)] = part
            self.n += len(part)

    def fork(self, n: int) -> "_Column":
        """A private copy of the first ``n`` items."""
        column = _Column(self.data.dtype)
        column.extend([self.data[:n]])
        return column


_FIELDS = ("steps", "values", "wall_times")
_SHARED_FIELDS = ("steps", "wall_times")
SharedArrays = dict[tuple[str, int, int, int], list[Any]]


def _holds(column: "_Column", start: int, arrays: list[np.ndarray]) -> bool:
    """True when ``column`` holds exactly ``arrays``, one after the other, from ``start`` on."""
    for array in arrays:
        end = start + len(array)
        if end > column.n or column.data.dtype != array.dtype or not (column.data[start:end] == array).all():
            return False
        start = end
    return True


class MetricBuffer:
    """One (rank, metric) series in growable columns, sorted by step on demand."""

    def __init__(self) -> None:
        self.n = 0
        self.columns: dict[str, _Column | None] = dict.fromkeys(_FIELDS)
        self.checked = 0
        """Rows known to be in step order."""
        self.max_step = 0
        """The highest step (the series' last once sorted); meaningful when ``n > 0``."""
        self.cached: Series | None = None
        self.superseded: tuple[Boundaries, int, Series] | None = None
        """The series without rows superseded after resumes: (boundaries, rows, series)."""

    def extend(self, chunks: list[Chunk], shared: SharedArrays, reserve: int = 0) -> None:
        """Append ``chunks`` (in order), making room for ``reserve`` rows in all.

        ``shared`` (one per shard read) remembers the step and wall-time columns
        extended so far: a buffer in the same state given equal arrays (metrics
        recorded together) adopts that column instead of copying the arrays again.
        """
        n_before = self.n
        added = sum(len(c.steps) for c in chunks)
        for field_name in _FIELDS:
            arrays = [getattr(c, field_name) for c in chunks]
            column = self.columns[field_name]
            key = (field_name, id(column), n_before, added)
            if field_name in _SHARED_FIELDS:
                same = next((c for c in shared.get(key, [])[1:] if _holds(c, n_before, arrays)), None)
                if same is not None:
                    self.columns[field_name] = same
                    continue
            if column is None:
                grown = _Column(arrays[0].dtype)
            elif column.n != n_before:
                grown = column.fork(n_before)  # a metric sharing it has grown past us
            else:
                grown = column
            grown.extend(arrays, reserve)
            self.columns[field_name] = grown
            if field_name in _SHARED_FIELDS:
                entry = shared.setdefault(key, [column])  # keeps ``column`` alive: its id stays unique
                if len(entry) <= 4:
                    entry.append(grown)
        tops = [int(c.steps.max()) for c in chunks if len(c.steps)]
        if tops:
            self.max_step = max(tops) if n_before == 0 else max(self.max_step, *tops)
        self.n = n_before + added
        self.cached = None

    def series(self, boundaries: "Boundaries" = ()) -> Series:
        """The rows ordered by step, without those a later session replaced (:func:`supersede`)."""
        whole = self._sorted()
        if not boundaries or not len(whole):
            return whole
        cached = self.superseded
        if cached is None or cached[0] != boundaries or cached[1] != self.n:
            cached = self.superseded = (boundaries, self.n, supersede(whole, boundaries))
        return cached[2]

    def _sorted(self) -> Series:
        if self.n == 0:
            return EMPTY_SERIES
        if self.cached is None:
            steps, values, walls = (self.columns[f].data[: self.n] for f in _FIELDS)  # type: ignore[union-attr]
            if self.n - self.checked > 0 and self.n > 1 and np.any(np.diff(steps[max(0, self.checked - 1) :]) < 0):
                order = np.argsort(steps, kind="stable")
                for field_name, array in zip(_FIELDS, (steps, values, walls)):
                    column = _Column(array.dtype)
                    column.extend([array[order]])
                    self.columns[field_name] = column
                steps, values, walls = (self.columns[f].data[: self.n] for f in _FIELDS)  # type: ignore[union-attr]
            self.checked = self.n
            self.cached = Series(*(_readonly(a) for a in (steps, values, walls)))
        return self.cached


Boundaries = tuple[tuple[float, int], ...]
"""Sessions after the first of a resumed run: (wall time it started, step it started from), by time."""


def supersede(series: Series, boundaries: Boundaries) -> Series:
    """``series`` (ordered by step) without the rows a later session of the run replaced.

    Each row belongs to the session whose start time its wall time follows
    (``boundaries``). A row is replaced when a later session started at or before
    its step (a training resumed from an older checkpoint abandons what came after
    it), or when a later session wrote the same step again (last write wins).
    Several rows of one session at one step are all kept, in write order, as before.
    """
    steps = series.steps
    if not len(steps):
        return series
    times = np.array([t for t, _ in boundaries], np.float64)
    froms = np.array([s for _, s in boundaries] + [np.iinfo(np.int64).max], np.int64)
    session = np.searchsorted(times, series.wall_times, side="right")
    cut = np.minimum.accumulate(froms[::-1])[::-1]  # session k: the lowest start of sessions k+1, k+2, ...
    keep = steps < cut[session]
    whole = bool(keep.all())
    kept = steps if whole else steps[keep]
    if np.any(kept[1:] == kept[:-1]):  # rows left that share a step: keep the newest session's
        starts = np.flatnonzero(np.concatenate(([True], steps[1:] != steps[:-1])))
        newest = np.repeat(np.maximum.reduceat(session, starts), np.diff(np.append(starts, len(steps))))
        keep &= session == newest
        whole = bool(keep.all())
    if whole:
        return series
    return Series(*(_readonly(np.ascontiguousarray(a[keep])) for a in (steps, series.values, series.wall_times)))


def _readonly(array: np.ndarray) -> np.ndarray:
    """A read-only view: series arrays may be shared between metrics and snapshots."""
    view = array.view()
    view.flags.writeable = False
    return view


EMPTY_SERIES = Series(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64))
"""What ``Run.series`` returns for a metric with no rows."""
