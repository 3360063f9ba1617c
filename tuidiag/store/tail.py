"""The newest value of one metric, read from the end of a run without loading the run.

``tuidiag status`` runs every few seconds from a tmux status bar: it must cost
milliseconds on a run of millions of steps. Rows are in flush order (``docs/format.md``),
so the newest rows are in the shard with the highest ``seq`` and, within it, in
the last row group: read backwards, one row group and four columns at a time,
until the metric shows up.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from tuidiag.format import METRICS_DIR
from tuidiag.store.decode import ShardError, check_footer, check_regular_file, open_parquet, texts, to_numpy
from tuidiag.store.discovery import Shards
from tuidiag.store.shards import list_shards
from tuidiag.store.tail_summary import Latest

MAX_SHARDS = 16
"""Shards looked at, newest first, before giving up on a metric that is rarely written."""
_COLUMNS = ["step", "wall_time", "metric", "value"]


def latest(run_dir: str | Path, metric: str, rank: int | None = None, shards: Shards | None = None) -> Latest | None:
    """The newest row of ``metric`` for ``rank`` (default: the lowest rank), or ``None``.

    Unreadable, forged or vanished shards (compacted away meanwhile) are skipped. ``shards``: those of
    ``metrics/``, when the caller has listed them already.
    """
    shards = list_shards(Path(run_dir) / METRICS_DIR) if shards is None else shards
    if not shards:
        return None
    rank = min(s.rank for s, _ in shards) if rank is None else rank
    newest = sorted((item for item in shards if item[0].rank == rank), key=lambda item: (-item[0].last, item[0].first))
    for _, path in newest[:MAX_SHARDS]:
        try:
            found = _latest_in(path, metric)
        except (OSError, pa.ArrowException, KeyError, ShardError):
            continue
        if found is not None:
            return found
    return None


def _latest_in(path: Path, metric: str) -> Latest | None:
    """The newest row of ``metric`` in one shard, reading row groups from the last one back.

    Only a regular file whose footer passes :func:`check_footer` is read (a FIFO named like
    a shard would block, a forged row count would size an allocation).
    """
    size = check_regular_file(path)
    with open_parquet(path, pre_buffer=False) as handle:
        check_footer(handle.metadata, size)
        for group in range(handle.metadata.num_row_groups - 1, -1, -1):
            table = handle.read_row_group(group, columns=_COLUMNS)
            rows = np.flatnonzero(_matches(table.column("metric"), metric))
            if len(rows):
                steps = to_numpy(table.column("step"))[rows]
                i = int(rows[len(rows) - 1 - int(np.argmax(steps[::-1]))])  # the last row of the highest step
                value = table.column("value")[i].as_py()
                wall = table.column("wall_time")[i].as_py()
                return Latest(int(table.column("step")[i].as_py()), float("nan") if value is None else float(value), float(wall))
    return None


def _matches(column: pa.ChunkedArray, metric: str) -> np.ndarray:
    """Mask of rows whose metric is ``metric``, comparing dictionary codes rather than strings.

    Plain numpy on the Arrow buffers: pyarrow's compute functions import pandas, which
    alone would cost a status line most of its time.
    """
    masks = []
    for chunk in column.chunks:
        if not pa.types.is_dictionary(chunk.type):
            masks.append(np.array([name == metric for name in texts(chunk)], bool))
            continue
        names = texts(chunk.dictionary)  # a few hundred names at most
        code = names.index(metric) if metric in names else -1
        masks.append(to_numpy(chunk.indices) == code)
    return np.concatenate(masks) if masks else np.zeros(0, bool)
