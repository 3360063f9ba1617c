"""Reading a run directory while it is being written: ``open_run`` and ``Run.refresh``.

A :class:`Run` loads a run once and then, on each :meth:`Run.refresh`, reads only
shards it has not seen. Rows are de-duplicated by the flush sequence number they
carry, so compaction (small shards merged into one, originals deleted) never makes
a reader miss or double-count a row. Bad files are skipped with a warning that
the run exposes; the reader never raises on bad data.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tuidiag.format import (
    CAPTURES_DIR,
    EVENTS_DIR,
    EVENTS_SCHEMA,
    METRICS_DIR,
    METRICS_SCHEMA,
    ShardName,
)
from tuidiag.store.decode import Chunk, Event, ShardError, check_regular_file, iter_shard, metric_columns, read_shard, split_columns, table_events, to_numpy
from tuidiag.store.manifest import effective_status, read_manifest
from tuidiag.store.seqset import SeqSet

log = logging.getLogger(__name__)

_METRIC_COLUMNS = ["step", "wall_time", "metric", "value", "seq"]
"""Columns of a metrics shard the reader decodes (``rank`` is in the shard's name)."""
_RELEASE_AFTER_ROWS = 1_000_000
_BATCH_ROWS = 262_144
"""Rows decoded at a time: a large shard never sits in memory whole, decoded and split at once."""

STATUS_UNKNOWN = "unknown"


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
            grown = np.empty(max(need, reserve, len(self.data) + len(self.data) // 2 if self.n else 0), dtype)
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
_Shared = dict[tuple[str, int, int, int], list[Any]]


def _holds(column: "_Column", start: int, arrays: list[np.ndarray]) -> bool:
    """True when ``column`` holds exactly ``arrays``, one after the other, from ``start`` on."""
    for array in arrays:
        end = start + len(array)
        if end > column.n or column.data.dtype != array.dtype or not (column.data[start:end] == array).all():
            return False
        start = end
    return True


class _MetricBuffer:
    """One (rank, metric) series in growable columns, sorted by step on demand."""

    def __init__(self) -> None:
        self.n = 0
        self.columns: dict[str, _Column | None] = dict.fromkeys(_FIELDS)
        self.checked = 0
        """Rows known to be in step order."""
        self.max_step = 0
        """The highest step (the series' last once sorted); meaningful when ``n > 0``."""
        self.cached: Series | None = None

    def extend(self, chunks: list[Chunk], shared: _Shared, reserve: int = 0) -> None:
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

    def series(self) -> Series:
        if self.n == 0:
            return _EMPTY
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


def _readonly(array: np.ndarray) -> np.ndarray:
    """A read-only view: series arrays may be shared between metrics and snapshots."""
    view = array.view()
    view.flags.writeable = False
    return view


class Run:
    """A run directory, loaded once and then refreshed incrementally."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.manifest: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.events: list[Event] = []
        self._metrics: dict[tuple[int, str], _MetricBuffer] = {}
        self._seen: dict[tuple[str, int], SeqSet] = {}
        self._bad_files: dict[Path, tuple[int, int]] = {}
        self._parsed: dict[str, dict[str, ShardName | None]] = {}
        self.rows_read = 0
        """Metric rows read so far."""
        self.refresh()

    @property
    def name(self) -> str:
        """The run's name from its manifest, else its directory name."""
        return str(self.manifest.get("name") or self.path.name)

    @property
    def status(self) -> str:
        """``running``, ``finished``, ``failed``, ``crashed`` or ``unknown`` (no manifest)."""
        return effective_status(self.manifest) if self.manifest else STATUS_UNKNOWN

    @property
    def ranks(self) -> list[int]:
        """The ranks that have written metrics."""
        return sorted({rank for rank, _ in self._metrics})

    @property
    def metric_names(self) -> list[str]:
        """Every metric name recorded by any rank, sorted."""
        return sorted({name for _, name in self._metrics})

    @property
    def captures(self) -> list[Path]:
        """NaN captures saved by the recorder (``captures/*.pt``)."""
        return sorted((self.path / CAPTURES_DIR).glob("*.pt"))

    def series(self, name: str, rank: int | None = None) -> Series:
        """The series of metric ``name`` for ``rank`` (default: the lowest rank that has it)."""
        if rank is None:
            ranks = [r for r, n in self._metrics if n == name]
            if not ranks:
                return _EMPTY
            rank = min(ranks)
        buffer = self._metrics.get((rank, name))
        return buffer.series() if buffer else _EMPTY

    def has(self, name: str) -> bool:
        """True when any rank recorded metric ``name``."""
        return any(n == name for _, n in self._metrics)

    @property
    def last_step(self) -> int | None:
        """The highest step recorded by any metric, or ``None`` before the first row."""
        tails = [buf.max_step for buf in self._metrics.values() if buf.n]
        return int(max(tails)) if tails else None

    def refresh(self) -> int:
        """Read whatever is new (manifest, shards, events); return the number of new rows."""
        self._read_manifest()
        before = self.rows_read
        unread = self._unread(METRICS_DIR)
        expected = _rows_in(unread) if len(unread) > 1 else 0
        read_now = 0
        for shard, path in unread:
            loaded = self._load_metrics(shard, path)
            if loaded is None:
                continue
            rows, parts = loaded
            # a long read (a run opened late): size each series once, from this shard's share
            scale = max(0, expected - read_now) / rows if expected and rows else 0.0
            read_now += rows
            self.rows_read += rows
            shared: _Shared = {}
            for name in list(parts):
                chunks = parts.pop(name)  # freed as soon as copied
                buffer = self._metrics.setdefault((shard.rank, name), _MetricBuffer())
                buffer.extend(chunks, shared, buffer.n + int(sum(len(c.steps) for c in chunks) * scale))
            del shared
        for shard, path in self._unread(EVENTS_DIR):
            table = self._load(shard, path, EVENTS_SCHEMA, EVENTS_DIR)
            if table is not None:
                self.events.extend(table_events(table))
                self.events.sort(key=lambda e: (e.step, e.wall_time))
        if self.rows_read - before > _RELEASE_AFTER_ROWS:
            pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed pages otherwise
        return self.rows_read - before

    def to_pandas(self) -> Any:
        """All metric rows in long form: columns ``step, wall_time, metric, value, rank``."""
        import pandas as pd

        frames = []
        for (rank, name), buf in sorted(self._metrics.items()):
            s = buf.series()
            frames.append(pd.DataFrame({"step": s.steps, "wall_time": s.wall_times, "metric": name, "value": s.values, "rank": rank}))
        if not frames:
            return pd.DataFrame({"step": [], "wall_time": [], "metric": [], "value": [], "rank": []})
        return pd.concat(frames, ignore_index=True)

    def _read_manifest(self) -> None:
        if not self.path.is_dir():
            self._warn(f"run directory {self.path} is missing (deleted or unmounted); showing what was read before")
            return
        try:
            self.manifest = read_manifest(self.path)
        except FileNotFoundError:
            self._warn("run.json is missing: status unknown")
        except (OSError, ValueError) as exc:
            self._warn(f"run.json is unreadable ({exc}); keeping the previous manifest")

    def _unread(self, table_dir: str) -> list[tuple[ShardName, Path]]:
        """Shards in ``table_dir`` with at least one sequence number not yet read, largest first.

        Runs on every refresh of a live run: names parsed once are remembered, and
        only unread shards get a ``Path``.
        """
        directory = self.path / table_dir
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        parsed = self._parsed.setdefault(table_dir, {})
        if len(parsed) > 2 * len(names) + 64:  # forget names compacted away
            parsed = self._parsed[table_dir] = {n: parsed[n] for n in names if n in parsed}
        result = []
        for name in names:
            shard = parsed.get(name, _UNPARSED)
            if shard is _UNPARSED:
                shard = parsed[name] = ShardName.parse(name)
            if shard is None:
                continue
            seen = self._seen.setdefault((table_dir, shard.rank), SeqSet())
            if seen.covers(shard.first, shard.last):
                continue
            path = directory / name
            if not self._known_bad(path):
                result.append((shard, path))
        result.sort(key=lambda item: (item[0].rank, item[0].first, -item[0].last, item[1].name))
        return result

    def _load(self, shard: ShardName, path: Path, schema: Any, table_dir: str) -> Any:
        """Read one shard and keep only rows whose flush was not read before."""
        seen = self._seen[(table_dir, shard.rank)]
        if seen.covers(shard.first, shard.last):
            return None
        try:
            table = read_shard(path, schema)
        except FileNotFoundError:
            return None  # compacted away between listing and reading: the merged shard has the rows
        except ShardError as exc:
            self._mark_bad(path, f"skipped {table_dir}/{path.name}: {exc}")
            return None
        seqs = to_numpy(table.column("seq"))
        if seen.overlaps(shard.first, shard.last):
            keep = ~seen.contains_mask(seqs)
            table = table.filter(keep)
            seqs = seqs[keep]
        self._mark_read(seen, shard, seqs)
        return table

    def _load_metrics(self, shard: ShardName, path: Path) -> tuple[int, dict[str, list[Chunk]]] | None:
        """Like :meth:`_load` for a metrics shard, decoded in batches straight into per-metric chunks.

        Returns the number of new rows and each metric's chunks (in row order), or
        ``None``. Nothing of a file that fails part-way is kept, as with a whole read.
        """
        seen = self._seen[(METRICS_DIR, shard.rank)]
        if seen.covers(shard.first, shard.last):
            return None
        overlap = seen.overlaps(shard.first, shard.last)
        rows, parts, seq_parts = 0, {}, []
        try:
            for table in _read_ahead(iter_shard(path, METRICS_SCHEMA, _METRIC_COLUMNS, _BATCH_ROWS)):
                seqs = to_numpy(table.column("seq"))
                codes, names, steps, values, walls = metric_columns(table)
                if overlap:
                    keep = ~seen.contains_mask(seqs)
                    seqs, codes, steps, values, walls = (a[keep] for a in (seqs, codes, steps, values, walls))
                seq_parts.append(_outside(seqs, shard))
                rows += len(seqs)
                for name, chunk in split_columns(codes, names, steps, values, walls).items():
                    parts.setdefault(name, []).append(chunk)
        except FileNotFoundError:
            return None  # compacted away between listing and reading: the merged shard has the rows
        except ShardError as exc:
            self._mark_bad(path, f"skipped {METRICS_DIR}/{path.name}: {exc}")
            return None
        self._mark_read(seen, shard, np.concatenate(seq_parts) if seq_parts else np.empty(0, np.int64))
        return rows, parts

    @staticmethod
    def _mark_read(seen: SeqSet, shard: ShardName, seqs: np.ndarray) -> None:
        """Remember the shard's flushes (its name's range, plus any row's ``seq`` outside it)."""
        outside = _outside(seqs, shard)
        if len(outside):
            seen.add_values(outside)
        seen.add_range(shard.first, shard.last)

    def _known_bad(self, path: Path) -> bool:
        try:
            stat = path.stat()
        except OSError:
            return False
        return self._bad_files.get(path) == (stat.st_size, stat.st_mtime_ns)

    def _mark_bad(self, path: Path, message: str) -> None:
        try:
            stat = path.stat()
            self._bad_files[path] = (stat.st_size, stat.st_mtime_ns)
        except OSError:
            pass
        self._warn(message)

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            log.warning("%s: %s", self.path, message)


def _read_ahead(tables: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """Iterate ``tables`` while a helper thread decodes the next ones (Arrow drops the GIL).

    The first two items are produced on the calling thread, so a small shard (one
    batch) costs no thread; exceptions reach the caller at the item where they happened.
    """
    first = next(tables, _DONE)
    if first is _DONE:
        return
    yield first
    second = next(tables, _DONE)  # most shards are one batch: no thread for those
    if second is _DONE:
        return
    yield second
    items: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(entry: tuple[Any, BaseException | None]) -> bool:
        """Queue ``entry`` unless the consumer went away (then never block)."""
        while not stop.is_set():
            try:
                items.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in tables:
                if not offer((item, None)):
                    return
        except BaseException as exc:  # handed to the consumer
            offer((_DONE, exc))
            return
        offer((_DONE, None))

    thread = threading.Thread(target=produce, name="tuidiag-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = items.get()
            if exc is not None:
                raise exc
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        thread.join()


_DONE = object()
_UNPARSED = object()


def _outside(seqs: np.ndarray, shard: ShardName) -> np.ndarray:
    """The sequence numbers among ``seqs`` outside the shard name's range (normally none)."""
    if not len(seqs) or (seqs.min() >= shard.first and seqs.max() <= shard.last):
        return seqs[:0]
    return seqs[(seqs < shard.first) | (seqs > shard.last)]


def _rows_in(shards: list[tuple[ShardName, Path]]) -> int:
    """Rows the reader will take from these shards (sorted as ``_unread`` sorts them), from
    their footers: a shard whose flushes an earlier one in the list covers is not counted."""
    total = 0
    planned: dict[int, SeqSet] = {}
    for shard, path in shards:
        covered = planned.setdefault(shard.rank, SeqSet())
        if covered.covers(shard.first, shard.last):
            continue
        try:
            check_regular_file(path)
            with pq.ParquetFile(path) as handle:
                total += handle.metadata.num_rows
        except (OSError, pa.ArrowException, ValueError, ShardError):
            continue
        covered.add_range(shard.first, shard.last)
    return total


_EMPTY = Series(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64))


def open_run(path: str | Path) -> Run:
    """Open a run directory and read everything in it; call ``refresh()`` to tail it."""
    return Run(path)
