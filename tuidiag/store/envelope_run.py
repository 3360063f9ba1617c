"""A run read as min/max envelopes, in memory bounded by the screen rather than by the run.

:class:`EnvelopeRun` reads a run like :class:`~tuidiag.store.reader.Run` (manifest,
events, the same flush bookkeeping, so compaction never makes it miss or double
count a shard) but keeps no rows: each metrics shard becomes, per metric, a
:class:`~tuidiag.store.envelope.Level` merged into that metric's
:class:`~tuidiag.store.envelope.Pyramid`. A shard with a summary
(:mod:`tuidiag.store.summary_files`) is read from it; any other from its rows, in
batches (a large one of an older run also leaves its levels in the cache
directory, so the next open reads those). Tailing a live run reads only the new
shards and grows the pyramids in place: the finest level from the first bucket
the new rows touch, then each coarser one.

At most :data:`MAX_BUCKETS` buckets are kept per level: a run so long that its
finest stored level holds more keeps coarser levels only. A chart's range finer
than the finest level kept (a zoom) is read from the rows of that range
(:meth:`EnvelopeRun.rows_between`). Reading rows (``series``) is not what this
class is for: the diagnosis reads the whole run with :func:`tuidiag.store.open_run`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from tuidiag.format import METRICS_DIR, METRICS_SCHEMA, ShardName  # type: ignore[attr-defined]
from tuidiag.store.decode import ShardError, check_footer, check_regular_file, iter_shard, metric_columns, open_parquet, to_numpy
from tuidiag.store.discovery import list_shards
from tuidiag.store.envelope import BASE_SHIFT, MAX_SHIFT, SHIFT_STEP, Level, Pyramid, coarsen, from_rows, merge
from tuidiag.store.read_plan import outside_seqs
from tuidiag.store.reader import Run
from tuidiag.store.seqset import SeqSet
from tuidiag.store.series_buffer import Series
from tuidiag.store.spread import spread_indices
from tuidiag.store.summary_files import cached_path, read_levels, shard_footer, summary_path, write_cached
from tuidiag.store.whole_summary import read_whole, whole_path

MAX_BUCKETS = 16_384
"""Buckets kept per level and metric: the memory of a run's envelopes does not grow with its length."""
MAX_WALL_MARKS = 8_192
"""(step, wall time) pairs kept for a run's clock (:meth:`EnvelopeRun.wall_marks`): a time axis is a few hundred columns."""
MAX_COVERED = 4_096
"""Shard names kept in :attr:`EnvelopeRun.covered` before those compacted away are forgotten."""
CACHE_MIN_ROWS = 100_000
"""A shard without a summary at least this large leaves its levels in the cache directory once read."""
_COLUMNS = ["step", "wall_time", "metric", "value", "seq"]
_BATCH_ROWS = 262_144


class EnvelopeRun(Run):
    """A run directory read into per-metric envelopes, then refreshed incrementally."""

    def __init__(self, path: str | Path, cache: bool = True) -> None:
        self._cache = cache
        """Whether levels computed from a large shard's rows are kept in the monitor's cache directory."""
        self._pyramids: dict[tuple[int, str], Pyramid] = {}
        self._floor = BASE_SHIFT
        """The finest shift kept: raised when a run's length makes :data:`MAX_BUCKETS` too few for the finer one."""
        self.summaries_read = 0
        """Shards read from their summaries rather than their rows."""
        self._window: tuple[tuple[int, int, int, int], dict[str, tuple[np.ndarray, np.ndarray]]] | None = None
        """The rows of the last window read (:meth:`rows_between`), by metric."""
        self._walls: list[tuple[np.ndarray, np.ndarray]] = []
        """(steps, wall times) of the shards read, from their footers (:meth:`wall_marks`)."""
        self.covered: dict[str, int] = {}
        """The metrics shards whose levels were added, by file name, with their sizes (what :func:`~tuidiag.store.whole_writer.write_whole` names)."""
        self.whole_shards = 0
        """Shards read from the rank's whole-run file (:mod:`tuidiag.store.whole_summary`) at the first read, else 0."""
        super().__init__(path)

    # ---- what a chart asks ---------------------------------------------------------
    def _metric_keys(self) -> Iterable[tuple[int, str]]:
        """The (rank, metric) pairs with envelopes: what the base class's ``ranks``, ``metric_names`` and ``has`` read."""
        return self._pyramids

    @property
    def last_step(self) -> int | None:
        """The highest step recorded by any metric."""
        tails = [int(p.levels[min(p.levels)].last_step[-1]) for p in self._pyramids.values() if len(p.levels[min(p.levels)])]
        return max(tails) if tails else None

    def wall_marks(self) -> tuple[np.ndarray, np.ndarray]:
        """(steps, wall times) when the shards read so far were written, at most :data:`MAX_WALL_MARKS` pairs (spread over
        the run): each row group's first and last, from the shards' footers, for a wall-clock x axis without rows."""
        if not self._walls:
            return np.empty(0, np.float64), np.empty(0, np.float64)
        steps = np.concatenate([s for s, _ in self._walls])
        walls = np.concatenate([w for _, w in self._walls])
        if len(steps) > MAX_WALL_MARKS:
            pick = spread_indices(len(steps), MAX_WALL_MARKS)
            steps, walls = steps[pick], walls[pick]
        self._walls = [(steps, walls)]  # one part from now on: the next call concatenates only what came since
        return steps, walls

    def pyramid(self, name: str, rank: int | None = None) -> Pyramid | None:
        """The envelopes of metric ``name`` for ``rank`` (default: the lowest rank that has it)."""
        if rank is None:
            ranks = [r for r, n in self._pyramids if n == name]
            if not ranks:
                return None
            rank = min(ranks)
        return self._pyramids.get((rank, name))

    def series(self, name: str, rank: int | None = None) -> Series:
        """Not kept here: an envelope run holds envelopes (:meth:`pyramid`), not rows."""
        raise TypeError("EnvelopeRun keeps envelopes, not rows: use pyramid() or rows_between(), or tuidiag.open_run")

    def rows_between(self, name: str, lo: int, hi: int, rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of ``name`` at steps in ``[lo, hi]``, in write order, read from the shards: only the
        row groups whose step statistics overlap the range are decoded (for a zoom finer than the envelopes).
        The rows of every metric in the window are kept until another window, or new rows, are asked for."""
        rank = (min(self.ranks) if self.ranks else 0) if rank is None else rank
        key = (rank, lo, hi, self.rows_read)
        if self._window is None or self._window[0] != key:
            self._window = (key, self._read_window(rank, lo, hi))
        return self._window[1].get(name, (np.empty(0, np.int64), np.empty(0, np.float64)))

    def _read_window(self, rank: int, lo: int, hi: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        found: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        seen = SeqSet()
        shards = sorted((item for item in list_shards(self.path / METRICS_DIR) if item[0].rank == rank),
                        key=lambda item: (item[0].first, -item[0].last))
        for shard, path in shards:
            if seen.covers(shard.first, shard.last):
                continue  # compacted: its rows are in the wider shard read before
            try:
                for table in _row_groups_between(path, lo, hi):
                    codes, names, steps, values, _ = metric_columns(table)
                    inside = (steps >= lo) & (steps <= hi)
                    codes, steps, values = codes[inside], steps[inside], values[inside]
                    for code in np.flatnonzero(np.bincount(codes)) if len(codes) else ():  # not np.unique: it imports numpy.ma
                        picked = codes == code
                        found.setdefault(str(names[code]), []).append((steps[picked], values[picked]))
            except (OSError, ShardError, pa.ArrowException, ValueError):
                continue  # vanished or unreadable: the envelope still shows it
            seen.add_range(shard.first, shard.last)
        return {name: (np.concatenate([s for s, _ in parts]), np.concatenate([v for _, v in parts])) for name, parts in found.items()}

    # ---- reading ------------------------------------------------------------------
    def _refresh_metrics(self) -> None:
        """Read each metrics shard not read yet, from its summary when it has a valid one, else from its rows."""
        self._set_floor()
        arrived: dict[tuple[int, str], list[Level]] = {}
        unread = self._unread(METRICS_DIR)
        if not self.covered and unread:
            unread = self._from_whole(unread)
        for shard, path in unread:
            seen = self._seen[(METRICS_DIR, shard.rank)]
            if seen.covers(shard.first, shard.last):
                continue
            levels = None if seen.overlaps(shard.first, shard.last) else self._summary_of(path)
            if levels is not None:
                seen.add_range(shard.first, shard.last)
                self.summaries_read += 1
            else:
                levels = self._rows_of(shard, path, seen)
                if levels is None:
                    continue
                self._mark_walls(path)
            self._cover(path)
            for name, (level, rows) in levels.items():
                arrived.setdefault((shard.rank, name), []).append(level)
                self.rows_read += rows
        for key, parts in arrived.items():  # shards in write order: their levels merge, then grow the pyramid once
            self._add(key, merge(parts))

    def _from_whole(self, unread: list[tuple[ShardName, Path]]) -> list[tuple[ShardName, Path]]:
        """At the first read: take the levels of the shards the rank's whole-run file stands for from it, when
        every one of them is there at its size and no other shard holds older rows; the shards left to read."""
        ranks = {shard.rank for shard, _ in unread}
        if len(ranks) != 1:
            return unread
        rank = ranks.pop()
        seen = self._seen[(METRICS_DIR, rank)]
        if len(seen):
            return unread
        try:
            whole = read_whole(whole_path(self.path, rank), self._floor)
        except (FileNotFoundError, ShardError, OSError, pa.ArrowException, ValueError):
            return unread
        if whole is None:
            return unread
        by_name = {path.name: (shard, path) for shard, path in unread}
        covered = SeqSet()
        for name, size in whole.covers.items():
            item = by_name.get(name)
            try:
                if item is None or item[1].stat().st_size != size:
                    return unread  # compacted or rewritten since: read shard by shard
            except OSError:
                return unread
            covered.add_range(item[0].first, item[0].last)
        newest = max(by_name[name][0].last for name in whole.covers)
        rest = []
        for shard, path in unread:
            if path.name in whole.covers or covered.covers(shard.first, shard.last):
                continue  # in the file (a compacted shard's parts not yet deleted too)
            if shard.first <= newest:
                return unread  # rows older than the file's newest: their order matters, read them all in order
            rest.append((shard, path))
        for name in whole.covers:
            shard = by_name[name][0]
            seen.add_range(shard.first, shard.last)
        for name, pyramid in whole.pyramids.items():
            self._pyramids[(rank, name)] = pyramid
            self.rows_read += pyramid.levels[min(pyramid.levels)].rows
        self.summaries_read += len(whole.covers)
        self.whole_shards = len(whole.covers)
        self.covered.update(whole.covers)
        self._keep_walls(*whole.walls)
        self._set_floor()  # a run longer than its manifest said keeps coarser levels only
        return rest

    def _cover(self, path: Path) -> None:
        """Note that the levels of the shard at ``path`` were added (its size: a later whole-run file's check)."""
        try:
            self.covered[path.name] = path.stat().st_size
        except OSError:
            return
        if len(self.covered) > MAX_COVERED:  # a live run's flushes, compacted away since: forget those gone
            try:
                present = set(os.listdir(self.path / METRICS_DIR))
            except OSError:
                return
            self.covered = {name: size for name, size in self.covered.items() if name in present}

    def _set_floor(self) -> None:
        """Keep coarser levels only, when the run is so long that the finest would exceed :data:`MAX_BUCKETS`."""
        last = self.manifest.get("last_step")
        known = [last] if isinstance(last, int) and not isinstance(last, bool) else []
        known += [int(p.levels[max(p.levels)].last_step[-1]) for p in self._pyramids.values() if len(p.levels[max(p.levels)])]
        longest = max([0, *known])
        floor = self._floor
        while (longest >> floor) + 1 > MAX_BUCKETS and floor + SHIFT_STEP <= MAX_SHIFT:
            floor += SHIFT_STEP
        if floor != self._floor:
            self._floor = floor
            for pyramid in self._pyramids.values():
                pyramid.trim(floor)

    def _summary_of(self, path: Path) -> dict[str, tuple[Level, int]] | None:
        """Each metric's level at the floor (and its rows) from the shard's summary, or its cached levels;
        ``None`` when it has neither valid."""
        try:
            rows, steps, walls = shard_footer(path)  # once, for the summary and the cached levels alike
        except (FileNotFoundError, ShardError, OSError, pa.ArrowException, ValueError):
            return None
        for where in self._level_files(path):
            try:
                found = read_levels(where, rows, min_shift=self._floor, finest_only=True)
            except (FileNotFoundError, ShardError, OSError, pa.ArrowException, ValueError):
                continue
            levels = {}
            for name, by_shift in found.items():
                finest = by_shift[min(by_shift)]
                level = finest if finest.shift == self._floor else coarsen(finest, self._floor) if finest.shift < self._floor else None
                if level is None:  # a summary coarser than the floor cannot be made finer: read the rows
                    return None
                levels[name] = (level, level.rows)
            self._keep_walls(steps, walls)
            return levels
        return None

    def _mark_walls(self, path: Path) -> None:
        """Keep when the rows of the shard at ``path``, just read, were written (its footer's statistics)."""
        try:
            _, steps, walls = shard_footer(path)
        except (FileNotFoundError, ShardError, OSError, pa.ArrowException, ValueError):
            return
        self._keep_walls(steps, walls)

    def _keep_walls(self, steps: np.ndarray, walls: np.ndarray) -> None:
        """Add a shard's (steps, wall times) to :meth:`wall_marks`'s, thinned when many shards added up."""
        if len(steps):
            self._walls.append((steps, walls))
        if len(self._walls) > 1024:  # a live run's small shards: merged and thinned now and then
            self.wall_marks()

    def _level_files(self, path: Path) -> Iterator[Path]:
        """The shard's summary, then the monitor's cached levels of it: the cache's path (a ``stat`` of the
        shard) only looked up when the summary was not valid."""
        yield summary_path(self.path, path.name)
        cached = cached_path(self.path, path)
        if cached is not None:
            yield cached

    def _rows_of(self, shard: ShardName, path: Path, seen: SeqSet) -> dict[str, tuple[Level, int]] | None:
        """Each metric's level (and rows) from the shard's rows, decoded in batches; ``None`` when it cannot be read.
        Nothing of a file that fails part-way is kept."""
        overlap = seen.overlaps(shard.first, shard.last)
        parts: dict[str, list[Level]] = {}
        rows: dict[str, int] = {}
        seq_parts = []
        try:
            for table in iter_shard(path, METRICS_SCHEMA, _COLUMNS, _BATCH_ROWS):
                seqs = to_numpy(table.column("seq"))
                codes, names, steps, values, _ = metric_columns(table)
                if overlap:
                    keep = ~seen.contains_mask(seqs)
                    seqs, codes, steps, values = seqs[keep], codes[keep], steps[keep], values[keep]
                seq_parts.append(outside_seqs(seqs, shard))
                order = np.argsort(codes, kind="stable")
                sorted_codes = codes[order]
                starts = np.flatnonzero(np.concatenate(([True], sorted_codes[1:] != sorted_codes[:-1]))) if len(codes) else []
                for a, b in zip(starts, [*list(starts)[1:], len(codes)]):
                    name = names[sorted_codes[a]]
                    picked = order[a:b]
                    parts.setdefault(name, []).append(from_rows(steps[picked], values[picked]))
                    rows[name] = rows.get(name, 0) + len(picked)
        except FileNotFoundError:
            return None  # compacted away between listing and reading: the merged shard has the rows
        except ShardError as exc:
            self._mark_bad(path, f"skipped {METRICS_DIR}/{path.name}: {exc}")
            return None
        self._mark_read(seen, shard, np.concatenate(seq_parts) if seq_parts else np.empty(0, np.int64))
        bases = {name: merge(found) for name, found in parts.items()}
        if self._cache and not overlap and sum(rows.values()) >= CACHE_MIN_ROWS:
            where = cached_path(self.path, path)
            if where is not None:
                write_cached(where, {name: Pyramid.of(base) for name, base in bases.items()}, sum(rows.values()))
        return {name: (coarsen(base, self._floor) if self._floor > base.shift else base, rows[name]) for name, base in bases.items()}

    def _add(self, key: tuple[int, str], level: Level) -> None:
        if level.shift < self._floor:  # read before the floor rose
            level = coarsen(level, self._floor)
        pyramid = self._pyramids.get(key)
        if pyramid is None:
            pyramid = self._pyramids[key] = Pyramid.of(level)
        else:
            pyramid.extend(level)
        if len(pyramid.levels[min(pyramid.levels)]) > MAX_BUCKETS:
            self._set_floor()


def _row_groups_between(path: Path, lo: int, hi: int) -> list[pa.Table]:
    """The row groups of a metrics shard whose ``step`` statistics overlap ``[lo, hi]`` (all, without statistics)."""
    size = check_regular_file(path)
    with open_parquet(path, pre_buffer=False) as handle:
        check_footer(handle.metadata, size)
        if "step" not in handle.schema_arrow.names:
            raise ShardError("no step column")
        column = handle.schema_arrow.names.index("step")
        tables = []
        for group in range(handle.metadata.num_row_groups):
            stats = handle.metadata.row_group(group).column(column).statistics
            if stats is not None and stats.has_min_max and (stats.max < lo or stats.min > hi):
                continue
            tables.append(handle.read_row_group(group, columns=["step", "metric", "value", "wall_time"]))
        return tables


def open_envelopes(path: str | Path) -> EnvelopeRun:
    """Open a run directory as envelopes; call ``refresh()`` to tail it."""
    return EnvelopeRun(path)

