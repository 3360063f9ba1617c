"""Reading a run directory while it is being written: ``open_run`` and ``Run.refresh``.

A :class:`Run` loads a run once and then, on each :meth:`Run.refresh`, reads only
shards it has not seen. Rows are de-duplicated by the flush sequence number they
carry, so compaction (small shards merged into one, originals deleted) never makes
a reader miss or double-count a row. Bad files are skipped with a warning that
the run exposes; the reader never raises on bad data.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuidiag.format import (
    CAPTURES_DIR,
    EVENTS_DIR,
    EVENTS_SCHEMA,
    METRICS_DIR,
    METRICS_SCHEMA,
    ShardName,
)
from tuidiag.store.decode import Chunk, Event, ShardError, read_shard, split_metrics, table_events
from tuidiag.store.manifest import effective_status, read_manifest
from tuidiag.store.seqset import SeqSet
from tuidiag.store.shards import list_shards

log = logging.getLogger(__name__)

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


class _MetricBuffer:
    """Chunks of one (rank, metric) series, concatenated on demand and cached."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.cached: Series | None = None

    def append(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)
        self.cached = None

    def series(self) -> Series:
        if self.cached is None:
            steps = np.concatenate([c.steps for c in self.chunks])
            values = np.concatenate([c.values for c in self.chunks])
            walls = np.concatenate([c.wall_times for c in self.chunks])
            if len(steps) > 1 and np.any(np.diff(steps) < 0):
                order = np.argsort(steps, kind="stable")
                steps, values, walls = steps[order], values[order], walls[order]
            self.chunks = [Chunk(steps, values, walls)]
            self.cached = Series(steps, values, walls)
        return self.cached


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
        tails = [buf.series().steps[-1] for buf in self._metrics.values() if len(buf.series())]
        return int(max(tails)) if tails else None

    def refresh(self) -> int:
        """Read whatever is new (manifest, shards, events); return the number of new rows."""
        self._read_manifest()
        before = self.rows_read
        for shard, path in self._unread(METRICS_DIR):
            table = self._load(shard, path, METRICS_SCHEMA, METRICS_DIR)
            if table is not None:
                self.rows_read += table.num_rows
                for name, chunk in split_metrics(table).items():
                    self._metrics.setdefault((shard.rank, name), _MetricBuffer()).append(chunk)
        for shard, path in self._unread(EVENTS_DIR):
            table = self._load(shard, path, EVENTS_SCHEMA, EVENTS_DIR)
            if table is not None:
                self.events.extend(table_events(table))
                self.events.sort(key=lambda e: (e.step, e.wall_time))
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
        """Shards in ``table_dir`` with at least one sequence number not yet read, largest first."""
        result = []
        for shard, path in list_shards(self.path / table_dir):
            seen = self._seen.setdefault((table_dir, shard.rank), SeqSet())
            if not seen.covers(shard.first, shard.last) and not self._known_bad(path):
                result.append((shard, path))
        result.sort(key=lambda item: (item[0].rank, item[0].first, -item[0].last))
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
        seqs = table.column("seq").to_numpy()
        if seen.overlaps(shard.first, shard.last):
            keep = ~seen.contains_mask(seqs)
            table = table.filter(keep)
            seqs = seqs[keep]
        seen.add_values(seqs)
        seen.add_range(shard.first, shard.last)
        return table

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


_EMPTY = Series(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64))


def open_run(path: str | Path) -> Run:
    """Open a run directory and read everything in it; call ``refresh()`` to tail it."""
    return Run(path)
