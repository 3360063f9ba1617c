"""Decoding one shard file into per-metric numpy chunks, validating it first.

No state lives here: :mod:`tuidiag.store.reader` decides which files and which
rows to read; this module turns a file into arrays or a clear error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tuidiag.format import FORMAT_VERSION, FORMAT_VERSION_KEY


class ShardError(Exception):
    """A shard that cannot be read: truncated, corrupt, foreign or from a newer format."""


@dataclass
class Chunk:
    """Rows of one metric from one shard."""

    steps: np.ndarray
    values: np.ndarray
    wall_times: np.ndarray


@dataclass(frozen=True)
class Event:
    """One event row: something that happened at a step (non-finite values, clipping, errors)."""

    step: int
    wall_time: float
    kind: str
    severity: str
    message: str
    rank: int = 0
    data: dict[str, Any] = field(default_factory=dict)


def read_shard(path: Path, schema: pa.Schema) -> pa.Table:
    """Read a shard and check it against ``schema``; raises :class:`ShardError`."""
    try:
        file_schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise ShardError(f"not a readable Parquet file ({exc})") from exc
    version = _format_version(file_schema)
    if version is not None and version > FORMAT_VERSION:
        raise ShardError(f"written by a newer tuidiag (format {version} > {FORMAT_VERSION}); upgrade tuidiag")
    missing = [f.name for f in schema if f.name not in file_schema.names]
    if missing:
        raise ShardError(f"not a tuidiag shard (missing columns: {', '.join(missing)})")
    try:
        table = pq.read_table(path, columns=schema.names)
        return table.cast(schema)
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise ShardError(f"unreadable rows ({exc})") from exc


def _format_version(schema: pa.Schema) -> int | None:
    raw = (schema.metadata or {}).get(FORMAT_VERSION_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def split_metrics(table: pa.Table) -> dict[str, Chunk]:
    """Group a metrics table's rows by metric name, keeping row order within each."""
    if table.num_rows == 0:
        return {}
    metric = table.column("metric").combine_chunks()
    if isinstance(metric, pa.ChunkedArray):
        metric = metric.chunk(0)
    codes = metric.indices.to_numpy(zero_copy_only=False)
    names = metric.dictionary.to_pylist()
    steps = table.column("step").to_numpy()
    values = table.column("value").to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    walls = table.column("wall_time").to_numpy()
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
    result: dict[str, Chunk] = {}
    for part in np.split(order, bounds):
        name = names[codes[part[0]]]
        result[name] = Chunk(steps[part], values[part], walls[part])
    return result


def table_events(table: pa.Table) -> list[Event]:
    """Turn an events table into :class:`Event` objects; a bad ``data`` field becomes ``{}``."""
    events = []
    for row in table.to_pylist():
        events.append(
            Event(
                step=int(row["step"]),
                wall_time=float(row["wall_time"]),
                kind=str(row["kind"]),
                severity=str(row["severity"]),
                message=str(row["message"]),
                rank=int(row["rank"]),
                data=_parse_data(row.get("data")),
            )
        )
    return events


def _parse_data(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {"raw": raw}
    return data if isinstance(data, dict) else {"value": data}
