"""A run written by another tool, read live: the reading interface of a tuidiag ``Run``, fed by a tail.

:class:`ForeignRun` keeps each series under the name the log uses and maps names onto
tuidiag's (``train_loss`` -> ``train/loss``) exactly as ``tuidiag import`` does
(:mod:`tuidiag.importers.names`); the mapping is redone whenever a new name appears, so
the most preferred alias wins however late it shows up. Its manifest is built from
the log (name, config, how it ended) and says ``source.kind``; nothing is ever written
to the log's directory. The first non-finite training loss or total gradient norm
becomes a ``nonfinite`` event, as the recorder would have written it.
"""

from __future__ import annotations

import re
import socket
import time
from abc import abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from tuidiag.format import EVENT_NONFINITE, GRAD_NORM_TOTAL, LOSS, STATUS_RUNNING
from tuidiag.importers.names import NameMap, map_names
from tuidiag.importers.source import SourceSeries
from tuidiag.sources.run_source import Batch, RunSource, Tail
from tuidiag.store import Event, Run, Series
from tuidiag.store.decode import Chunk
from tuidiag.store.manifest import process_gone
from tuidiag.store.series_buffer import EMPTY_SERIES, MetricBuffer

ACTIVE_WRITE = 30.0
"""A foreign run whose log says nothing of its end is ``running`` while its files were written this many
seconds ago or less (and its writer, when the log names it, still exists)."""
RECENT_WRITE = 120.0
"""After :data:`ACTIVE_WRITE`, a run whose writer cannot be seen is ``idle`` up to this many seconds since its
last write (TensorBoard's writers flush every 120 s by default), then ``unknown``: the log cannot tell an
ended training from a stopped one. A writer seen alive on this host keeps it ``idle``."""
STATUS_UNKNOWN = "unknown"
STATUS_IDLE = "idle"
"""No new data for a while, and nothing says the writer ended."""
STATUS_EXITED = "exited"
"""Every process that wrote the log ran on this host and is gone (a TensorBoard event file names its writer's
host and pid; ``SummaryWriter.close()`` itself writes nothing): the training stopped, how the log cannot tell."""
NONFINITE_WATCHED = (LOSS, GRAD_NORM_TOTAL)
VERSION_DIR = re.compile(r"^version_\d+$")
"""Lightning's loggers name runs ``<name>/version_<n>``: the version alone says little."""


def default_name(path: Path) -> str:
    """A run's name when its log gives none: its directory (or file) name, ``lightning_logs/version_0`` for Lightning's."""
    if VERSION_DIR.match(path.name) and path.parent.name:
        return f"{path.parent.name}/{path.name}"
    return path.name


class ForeignRun(Run):
    """A foreign log at ``path``, read by ``tail`` on each :meth:`refresh`; one rank (0)."""

    def __init__(self, path: str | Path, kind: str, tail: Tail) -> None:
        self.kind = kind
        self._tail = tail
        self._buffers: dict[str, MetricBuffer] = {}
        """Series by the name the log uses, in the order the names first appeared."""
        self._names = NameMap()
        self._by_target: dict[str, str] = {}
        self._config: dict[str, Any] = {}
        self._hparams: dict[str, Any] | None = None
        self._ended: str | None = None
        self._last_write: float | None = None
        self._writers: set[tuple[str, int]] = set()
        """(host, pid) of the processes the log's file names say wrote it."""
        self._log_name: str | None = None
        super().__init__(path)  # sets the common state, then calls refresh()

    @property
    def name(self) -> str:
        """The name the log gives the run, else its directory (or file) name."""
        return self._log_name or default_name(Path(self.path))

    @property
    def status(self) -> str:
        """How the log says the run ended; else ``exited`` when its writers are known to be gone; else by the
        age of its last write: ``running``, then ``idle``, then ``unknown`` (:data:`ACTIVE_WRITE`, :data:`RECENT_WRITE`)."""
        if self._ended is not None:
            return self._ended
        if self._writers and all(process_gone(host, pid) for host, pid in self._writers):
            return STATUS_EXITED
        age = time.time() - self._last_write if self._last_write is not None else None
        if age is not None and age <= ACTIVE_WRITE:
            return STATUS_RUNNING
        alive = any(not process_gone(host, pid) and host == socket.gethostname() for host, pid in self._writers)
        return STATUS_IDLE if alive or (age is not None and age <= RECENT_WRITE) else STATUS_UNKNOWN

    @property
    def ranks(self) -> list[int]:
        """``[0]`` once any row was read (foreign logs here are single-process)."""
        return [0] if self._buffers else []

    @property
    def metric_names(self) -> list[str]:
        """Every metric under its tuidiag name (mapped, or the log's own name made safe), sorted."""
        return sorted(self._by_target)

    @property
    def captures(self) -> list[Path]:
        """Foreign logs hold no NaN captures."""
        return []

    def series(self, name: str, rank: int | None = None) -> Series:
        """The series of tuidiag name ``name``, ordered by step (rank 0 only)."""
        source = self._by_target.get(name)
        if source is None or rank not in (None, 0):
            return EMPTY_SERIES
        return self._buffers[source].series()

    def has(self, name: str) -> bool:
        """True when the log holds a series that maps onto ``name``."""
        return name in self._by_target

    @property
    def last_step(self) -> int | None:
        """The highest step of any series, or ``None`` before the first row."""
        tops = [buffer.max_step for buffer in self._buffers.values() if buffer.n]
        return int(max(tops)) if tops else None

    def to_pandas(self) -> Any:
        """All rows in long form (``step, wall_time, metric, value, rank``), under tuidiag's names."""
        import pandas as pd

        frames = [pd.DataFrame({"step": s.steps, "wall_time": s.wall_times, "metric": name, "value": s.values, "rank": 0})
                  for name in self.metric_names for s in [self.series(name)]]
        if not frames:
            return pd.DataFrame({"step": [], "wall_time": [], "metric": [], "value": [], "rank": []})
        return pd.concat(frames, ignore_index=True)

    def refresh(self) -> int:
        """Read what the log gained since the last call; return the number of new rows."""
        try:
            batch = self._tail.read()
        except Exception as exc:  # a tail must not raise; if one does, the run still shows what it had
            batch = Batch(notes=[f"reading stopped: {type(exc).__name__}: {exc}"])
        if batch.restart:
            self._buffers.clear()
            self.events = [e for e in self.events if e.kind != EVENT_NONFINITE]
        before = self.rows_read
        names_before = len(self._buffers)
        for piece in batch.series:
            if len(piece.steps):
                buffer = self._buffers.setdefault(piece.name, MetricBuffer())
                buffer.extend([Chunk(piece.steps, piece.values, piece.wall_times)], {})
                self.rows_read += len(piece.steps)
        if len(self._buffers) != names_before or batch.restart:
            self._names = map_names(list(self._buffers))
            self._by_target = {self._names.target(source): source for source in self._buffers}
        self._note_nonfinite(batch.series)
        if batch.config is not None:
            self._config = dict(batch.config)
            self._hparams = batch.hparams
        self._ended = batch.ended or self._ended
        self._last_write = batch.last_write if batch.last_write is not None else self._last_write
        self._log_name = batch.name or self._log_name
        self._writers.update(batch.writers)
        self.unreadable = batch.unreadable
        for note in batch.notes:  # an unreadable log's reason is its diagnosis and status: not logged a second time
            self._warn(note, quiet=self.unreadable is not None)
        self.manifest = self._manifest()
        return self.rows_read - before

    def _note_nonfinite(self, pieces: list[SourceSeries]) -> None:
        """The first non-finite training loss or total gradient norm, as a ``nonfinite`` event (once)."""
        if any(e.kind == EVENT_NONFINITE for e in self.events):
            return
        found = []
        for piece in pieces:
            target = self._names.mapped.get(piece.name)
            if target in NONFINITE_WATCHED:
                bad = np.flatnonzero(~np.isfinite(piece.values))
                if len(bad):
                    i = int(bad[np.argmin(piece.steps[bad])])
                    found.append((int(piece.steps[i]), float(piece.wall_times[i]), float(piece.values[i]), target))
        if found:
            step, wall, value, target = min(found)
            data = {"loss": repr(value) if target == LOSS else None, "params": []}
            self.events.append(Event(step, wall, EVENT_NONFINITE, "critical", f"{target} is {value} at step {step}", 0, data))
            self.events.sort(key=lambda e: (e.step, e.wall_time))

    def _manifest(self) -> dict[str, Any]:
        """A manifest as the monitor reads one: name, status, config, and where the run is read from."""
        starts = [float(buffer.series().wall_times[0]) for buffer in self._buffers.values() if buffer.n]
        source = {"kind": self.kind, "path": str(self.path), "live": True, "mapped": dict(self._names.mapped)}
        manifest: dict[str, Any] = {"name": self.name, "status": self.status, "config": dict(self._config), "source": source}
        if starts:
            manifest["created"] = min(starts)
        if self._hparams is not None:
            manifest["hparams"] = self._hparams
        return manifest


class ForeignSource(RunSource):
    """A kind of run written by another tool: read by a :class:`~tuidiag.sources.run_source.Tail`,
    shown as a read-only :class:`ForeignRun`."""

    appends_in_place = True

    @abstractmethod
    def tail(self, key: Path) -> Tail:
        """A fresh incremental reader of the run at ``key``."""

    def open(self, key: Path) -> Run:
        """The run at ``key``, read once."""
        return ForeignRun(key, self.kind, self.tail(key))
