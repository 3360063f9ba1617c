"""Writing an imported run as a normal tuidiag run directory, through the store's own code.

The run is built in a hidden temporary directory next to its target (which run discovery
ignores) and renamed into place (:func:`tuidiag.store.safe_write.write_directory_atomic`),
so a monitor watching the output sees the whole run or nothing. The result is what the recorder would have written:
``run.json`` with status ``finished`` (plus a ``source`` field), one metrics shard and
one events shard with the format's explicit schemas.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from tuidiag.format import (
    EVENT_NONFINITE,
    EVENTS_DIR,
    EVENTS_SCHEMA,
    GRAD_NORM_TOTAL,
    LOSS,
    METRICS_DIR,
    METRICS_SCHEMA,
    STATUS_FINISHED,
    ShardName,
)
from tuidiag.importers.names import NameMap, map_names
from tuidiag.importers.source import SourceRun, SourceSeries
from tuidiag.store.discovery import is_run_dir
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.store.safe_write import write_directory_atomic
from tuidiag.store.shards import write_table_atomic

EVENT_IMPORTED = "imported"
SHARD = ShardName(0, 0, 0)


class RunExistsError(Exception):
    """The target run directory exists and ``force`` was not given (or it is not a run)."""

    def __init__(self, message: str, target: Path, replaceable: bool) -> None:
        super().__init__(message)
        self.target = target
        self.replaceable = replaceable
        """True when ``target`` holds a run that ``force`` would replace; ``False`` when it is not a run (never replaced)."""


@dataclass
class WrittenRun:
    """What an import wrote: where, how names were mapped, how many rows."""

    path: Path
    names: NameMap
    rows: int
    last_step: int | None
    newest: float | None = None
    """The newest wall time written (None: the source had none): the copy's ``ended`` and ``heartbeat``."""


def target_of(run: SourceRun, out_dir: Path) -> Path:
    """The directory a source run is written to."""
    return out_dir / run.relative


def check_target(target: Path, force: bool) -> None:
    """Raise :class:`RunExistsError` when writing ``target`` would overwrite something it should not."""
    if not target.exists():
        return
    if not target.is_dir() or (not is_run_dir(target) and any(target.iterdir())):
        raise RunExistsError(f"{target} exists and is not a tuidiag run; not replacing it", target, False)
    if is_run_dir(target) and not force:
        raise RunExistsError(f"{target} already holds a run", target, True)


def write_run(run: SourceRun, out_dir: Path, force: bool = False) -> WrittenRun:
    """Write ``run`` below ``out_dir`` as a finished tuidiag run; returns what was written."""
    target = target_of(run, out_dir)
    check_target(target, force)
    names = map_names([s.name for s in run.series])
    metrics = metrics_table(run.series, names)
    last_step = int(metrics["step"].to_numpy().max()) if metrics.num_rows else None
    target.parent.mkdir(parents=True, exist_ok=True)
    write_directory_atomic(target, lambda building: _write_contents(building, run, names, metrics, last_step))
    return WrittenRun(target, names, metrics.num_rows, last_step, _newest(metrics))


def _newest(metrics: pa.Table) -> float | None:
    """The newest finite wall time of ``metrics`` (None: none)."""
    walls = metrics["wall_time"].to_numpy() if metrics.num_rows else np.empty(0)
    walls = walls[np.isfinite(walls)]
    return float(walls.max()) if len(walls) else None


def _write_contents(run_dir: Path, run: SourceRun, names: NameMap, metrics: pa.Table, last_step: int | None) -> None:
    (run_dir / METRICS_DIR).mkdir(parents=True)
    (run_dir / EVENTS_DIR).mkdir()
    write_table_atomic(run_dir / METRICS_DIR / SHARD.filename, metrics)
    write_table_atomic(run_dir / EVENTS_DIR / SHARD.filename, events_table(run, names))
    write_manifest(run_dir, manifest(run, names, metrics, last_step))


def metrics_table(series: list[SourceSeries], names: NameMap) -> pa.Table:
    """All series as one long-form metrics table (rank 0, flush 0) with the format's schema."""
    targets = [names.target(s.name) for s in series]
    lengths = np.array([len(s.steps) for s in series], np.int64)
    n = int(lengths.sum())
    codes = np.repeat(np.arange(len(series), dtype=np.int32), lengths)
    metric = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(targets, pa.string()))
    empty = np.empty(0)
    return pa.Table.from_arrays(
        [
            pa.array(np.concatenate([s.steps for s in series] or [empty]).astype(np.int64)),
            pa.array(np.concatenate([s.wall_times for s in series] or [empty]).astype(np.float64)),
            metric,
            pa.array(np.concatenate([s.values for s in series] or [empty]).astype(np.float64)),
            pa.array(np.zeros(n, np.int32)),
            pa.array(np.zeros(n, np.int64)),
        ],
        schema=METRICS_SCHEMA,
    )


def _first_nonfinite(series: list[SourceSeries], names: NameMap) -> tuple[int, float, str] | None:
    """(step, value, tuidiag name) of the earliest non-finite loss or total gradient norm."""
    found = []
    for s in series:
        if names.target(s.name) in (LOSS, GRAD_NORM_TOTAL):
            bad = np.flatnonzero(~np.isfinite(s.values))
            if len(bad):
                i = bad[np.argmin(s.steps[bad])]
                found.append((int(s.steps[i]), float(s.values[i]), names.target(s.name)))
    return min(found) if found else None


EventTuple = tuple[int, float, str, str, str, dict]
"""step, wall time, kind, severity, message, data."""


def event_rows(run: SourceRun, names: NameMap) -> list[EventTuple]:
    """An ``imported`` event naming the source, and a ``nonfinite`` one as the recorder would write it."""
    steps = [int(s.steps.min()) for s in run.series if len(s.steps)]
    times = [float(s.wall_times.min()) for s in run.series if len(s.wall_times)]
    rows = [(min(steps, default=0), min(times, default=time.time()), EVENT_IMPORTED, "info",
             f"imported from {run.source.get('format')}: {run.source.get('path')}", {"source": run.source})]
    bad = _first_nonfinite(run.series, names)
    if bad is not None:
        step, value, name = bad
        walls = [float(s.wall_times[s.steps == step].min()) for s in run.series if (s.steps == step).any()]
        data = {"loss": repr(value) if name == LOSS else None, "params": []}
        message = f"{name} is {value} at step {step}"
        rows.append((step, min(walls, default=rows[0][1]), EVENT_NONFINITE, "critical", message, data))
    return rows


def events_table(run: SourceRun, names: NameMap) -> pa.Table:
    """The run's events (:func:`event_rows`) as an events shard with the format's schema."""
    rows = event_rows(run, names)
    return pa.Table.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.int64()),
            pa.array([r[1] for r in rows], pa.float64()),
            pa.array([r[2] for r in rows], pa.string()).dictionary_encode(),
            pa.array([r[3] for r in rows], pa.string()).dictionary_encode(),
            pa.array([r[4] for r in rows], pa.string()),
            pa.array([json.dumps(r[5], default=repr) for r in rows], pa.string()),
            pa.array(np.zeros(len(rows), np.int32)),
            pa.array(np.zeros(len(rows), np.int64)),
        ],
        schema=EVENTS_SCHEMA,
    )


def manifest(run: SourceRun, names: NameMap, metrics: pa.Table, last_step: int | None) -> dict:
    """``run.json`` of the imported run: finished, times from the source, the source and name mapping noted."""
    data = new_manifest(str(run.relative), run.config, 1, 1.0)
    walls = metrics["wall_time"].to_numpy() if metrics.num_rows else np.empty(0)
    walls = walls[np.isfinite(walls)]
    now = time.time()
    newest = _newest(metrics)
    data.update(
        created=float(walls.min()) if len(walls) else now,
        ended=newest if newest is not None else now,
        heartbeat=newest if newest is not None else now,  # the log's last sign of life, not the import's time
        status=STATUS_FINISHED,
        last_step=last_step,
        stats={"rows_written": metrics.num_rows, "dropped_rows": 0, "errors": 0},
        factory=None,
        source=dict(run.source, imported=now, mapped=names.mapped),
    )
    if run.hparams is not None:
        data["hparams"] = run.hparams
    return data
