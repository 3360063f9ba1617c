"""The newest value of one metric, read from the end of a run without loading the run.

``tuidiag status`` runs every few seconds from a tmux status bar: it must cost
milliseconds on a run of millions of steps. Rows are in flush order (``docs/format.md``),
so the newest rows are in the shard with the highest ``seq`` and, within it, in
the last row group: read backwards, one row group and four columns at a time,
until the metric shows up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tuidiag.format import METRICS_DIR
from tuidiag.store.shards import list_shards

MAX_SHARDS = 16
"""Shards looked at, newest first, before giving up on a metric that is rarely written."""
_COLUMNS = ["step", "wall_time", "metric", "value"]


@dataclass(frozen=True)
class Latest:
    """The newest row of a metric: its step, value and wall time."""

    step: int
    value: float
    wall_time: float


def latest(run_dir: str | Path, metric: str, rank: int | None = None) -> Latest | None:
    """The newest row of ``metric`` for ``rank`` (default: the lowest rank), or ``None``.

    Unreadable or vanished shards (compacted away meanwhile) are skipped.
    """
    shards = list_shards(Path(run_dir) / METRICS_DIR)
    if not shards:
        return None
    rank = min(s.rank for s, _ in shards) if rank is None else rank
    newest = sorted((item for item in shards if item[0].rank == rank), key=lambda item: (-item[0].last, item[0].first))
    for _, path in newest[:MAX_SHARDS]:
        try:
            found = _latest_in(path, metric)
        except (OSError, pa.ArrowException, KeyError):
            continue
        if found is not None:
            return found
    return None


def _latest_in(path: Path, metric: str) -> Latest | None:
    """The newest row of ``metric`` in one shard, reading row groups from the last one back."""
    with pq.ParquetFile(path, pre_buffer=False) as handle:
        for group in range(handle.metadata.num_row_groups - 1, -1, -1):
            table = handle.read_row_group(group, columns=_COLUMNS)
            rows = table.filter(_matches(table.column("metric"), metric))
            if rows.num_rows:
                steps = rows.column("step").to_numpy()
                i = int(len(steps) - 1 - np.argmax(steps[::-1]))  # the last row of the highest step
                value = rows.column("value")[i].as_py()
                return Latest(
                    int(steps[i]),
                    float("nan") if value is None else float(value),
                    float(rows.column("wall_time")[i].as_py()),
                )
    return None


def _matches(column: pa.ChunkedArray, metric: str) -> pa.ChunkedArray:
    """Mask of rows whose metric is ``metric``, comparing dictionary codes rather than strings."""
    masks = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            code = chunk.dictionary.index(metric).as_py()
            masks.append(pc.equal(chunk.indices, code) if code >= 0 else pa.array(np.zeros(len(chunk), bool)))
        else:
            masks.append(pc.equal(chunk, metric))
    return pa.chunked_array(masks, pa.bool_())
