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
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from tuidiag.format import (
    CAPTURES_DIR,
    EVENT_RESUMED,
    EVENTS_DIR,
    EVENTS_SCHEMA,
    METRICS_DIR,
    METRICS_SCHEMA,
    ShardName,
)
from tuidiag.store.decode import Chunk, Event, ShardError, iter_shard, metric_columns, read_shard, split_columns, table_events, to_numpy
from tuidiag.store.manifest import effective_status, read_manifest
from tuidiag.store.read_plan import outside_seqs, read_ahead, rows_in
from tuidiag.store.seqset import SeqSet
from tuidiag.store.series_buffer import EMPTY_SERIES, Boundaries, MetricBuffer, Series, SharedArrays

log = logging.getLogger(__name__)

_METRIC_COLUMNS = ["step", "wall_time", "metric", "value", "seq"]
"""Columns of a metrics shard the reader decodes (``rank`` is in the shard's name)."""
_RELEASE_AFTER_ROWS = 1_000_000
_BATCH_ROWS = 262_144
"""Rows decoded at a time: a large shard never sits in memory whole, decoded and split at once."""

STATUS_UNKNOWN = "unknown"
_UNPARSED = object()


class Run:
    """A run directory, loaded once and then refreshed incrementally."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.manifest: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.unreadable: str | None = None
        """Why no data can be read at all, as what to do (``install tuidiag[tensorboard]``); ``None`` when readable."""
        self.events: list[Event] = []
        self._metrics: dict[tuple[int, str], MetricBuffer] = {}
        self._seen: dict[tuple[str, int], SeqSet] = {}
        self._bad_files: dict[Path, tuple[int, int]] = {}
        self._parsed: dict[str, dict[str, ShardName | None]] = {}
        self.rows_read = 0
        """Metric rows read so far."""
        self._boundaries: Boundaries = ()
        """(wall time, from step) of the ``resumed`` events: rows are assigned to sessions by time."""
        self.refresh()

    @property
    def name(self) -> str:
        """The run's name from its manifest, else its directory name."""
        return str(self.manifest.get("name") or self.path.name)

    @property
    def status(self) -> str:
        """``running``, ``finished``, ``failed``, ``crashed`` or ``unknown`` (no manifest)."""
        return effective_status(self.manifest) if self.manifest else STATUS_UNKNOWN

    def _metric_keys(self) -> Iterable[tuple[int, str]]:
        """The (rank, metric) pairs this run holds: what ``ranks``, ``metric_names`` and ``has`` read
        (a subclass that keeps its metrics elsewhere names its own)."""
        return self._metrics

    @property
    def ranks(self) -> list[int]:
        """The ranks that have written metrics."""
        return sorted({rank for rank, _ in self._metric_keys()})

    @property
    def metric_names(self) -> list[str]:
        """Every metric name recorded by any rank, sorted."""
        return sorted({name for _, name in self._metric_keys()})

    @property
    def captures(self) -> list[Path]:
        """NaN captures saved by the recorder (``captures/*.pt``)."""
        return sorted((self.path / CAPTURES_DIR).glob("*.pt"))

    def series(self, name: str, rank: int | None = None) -> Series:
        """The series of metric ``name`` for ``rank`` (default: the lowest rank that has it).

        Ordered by step. Rows that share a step are all kept, in write order, unless
        they come from different sessions of a resumed run: then only the newest
        session's rows of that step are returned (last write wins after a resume).
        """
        if rank is None:
            ranks = [r for r, n in self._metrics if n == name]
            if not ranks:
                return EMPTY_SERIES
            rank = min(ranks)
        buffer = self._metrics.get((rank, name))
        return buffer.series(self._boundaries) if buffer else EMPTY_SERIES

    @property
    def resumes(self) -> list[Event]:
        """The ``resumed`` events: where a later session continued the run (``data["from_step"]``).

        Each is a boundary: the steps from ``step`` on were recorded by another process
        than those before, and where both recorded a step, the later session's rows are
        the ones :meth:`series` returns.
        """
        return [e for e in self.events if e.kind == EVENT_RESUMED]

    @property
    def resume_steps(self) -> list[int]:
        """The steps at which sessions after the first started, ascending."""
        return sorted({e.step for e in self.resumes})

    def has(self, name: str) -> bool:
        """True when any rank recorded metric ``name``."""
        return any(n == name for _, n in self._metric_keys())

    @property
    def last_step(self) -> int | None:
        """The highest step recorded by any metric (and not replaced after a resume), or ``None`` before the first row."""
        if self._boundaries:
            tails = [int(s.steps[-1]) for buf in self._metrics.values() if len(s := buf.series(self._boundaries))]
            return max(tails) if tails else None
        tails = [buf.max_step for buf in self._metrics.values() if buf.n]
        return int(max(tails)) if tails else None

    def refresh(self) -> int:
        """Read whatever is new (manifest, shards, events); return the number of new rows."""
        self._read_manifest()
        before = self.rows_read
        self._refresh_metrics()
        self._refresh_events()
        if self.rows_read - before > _RELEASE_AFTER_ROWS:
            pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed pages otherwise
        return self.rows_read - before

    def _refresh_metrics(self) -> None:
        """Read the metrics shards not read yet into the series buffers."""
        unread = self._unread(METRICS_DIR)
        expected = rows_in(unread) if len(unread) > 1 else 0
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
            shared: SharedArrays = {}
            for name in list(parts):
                chunks = parts.pop(name)  # freed as soon as copied
                buffer = self._metrics.setdefault((shard.rank, name), MetricBuffer())
                buffer.extend(chunks, shared, buffer.n + int(sum(len(c.steps) for c in chunks) * scale))
            del shared

    def _refresh_events(self) -> None:
        """Read the events shards not read yet; note where later sessions began."""
        for shard, path in self._unread(EVENTS_DIR):
            table = self._load(shard, path, EVENTS_SCHEMA, EVENTS_DIR)
            if table is not None:
                self.events.extend(table_events(table))
                self.events.sort(key=lambda e: (e.step, e.wall_time))
        self._boundaries = tuple(sorted({(e.wall_time, _from_step(e)) for e in self.events if e.kind == EVENT_RESUMED}))

    def to_pandas(self) -> Any:
        """All metric rows in long form: columns ``step, wall_time, metric, value, rank``."""
        import pandas as pd

        frames = []
        for (rank, name), buf in sorted(self._metrics.items()):
            s = buf.series(self._boundaries)
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
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep for the parser
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
            for table in read_ahead(iter_shard(path, METRICS_SCHEMA, _METRIC_COLUMNS, _BATCH_ROWS)):
                seqs = to_numpy(table.column("seq"))
                codes, names, steps, values, walls = metric_columns(table)
                if overlap:
                    keep = ~seen.contains_mask(seqs)
                    seqs, codes, steps, values, walls = (a[keep] for a in (seqs, codes, steps, values, walls))
                seq_parts.append(outside_seqs(seqs, shard))
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
        outside = outside_seqs(seqs, shard)
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

    def _warn(self, message: str, quiet: bool = False) -> None:
        """Keep ``message`` among the run's warnings (once) and log it, unless ``quiet`` (shown by other means)."""
        if message not in self.warnings:
            self.warnings.append(message)
            if not quiet:
                log.warning("%s: %s", self.path, message)




def _from_step(event: Event) -> int:
    """The step a ``resumed`` event's session started from (its ``data``, else its own step)."""
    value = event.data.get("from_step")
    if not isinstance(value, int) or isinstance(value, bool):
        return event.step
    return min(max(value, -(2**63)), 2**63 - 1)  # a hand-edited event must not overflow int64


def open_run(path: str | Path) -> Run:
    """Open a run directory and read everything in it; call ``refresh()`` to tail it."""
    return Run(path)
