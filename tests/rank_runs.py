"""Writing synthetic multi-rank runs in the real format: one ``ShardWriter`` per rank, rank 0's manifest."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tuidiag.format import STATUS_FINISHED
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store.manifest import new_manifest, write_manifest

RankMetrics = dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]


def write_ranks(run_dir: Path, ranks: RankMetrics, wall_start: float | None = None) -> Path:
    """Write ``{rank: {metric: (steps, values)}}`` as a finished run; wall time advances 0.01 s a step."""
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.time() - 3600 if wall_start is None else wall_start
    last = 0
    for rank, series in ranks.items():
        by_step: dict[int, dict[str, float]] = {}
        for name, (st, values) in series.items():
            for step, value in zip(st.tolist(), values.tolist(), strict=True):
                by_step.setdefault(int(step), {})[name] = value
        steps = sorted(by_step)
        writer = ShardWriter(run_dir, rank, flush_interval=60.0, max_queue=len(steps) + 10)
        for step in steps:
            row = by_step[step]
            writer.submit(
                MetricBatch(step, start + 0.01 * step, Layout(list(row)), np.array(list(row.values()))), len(row)
            )
        writer.close()
        last = max(last, steps[-1] if steps else 0)
    info = new_manifest(run_dir.name, {"lr": 1e-3}, len(ranks), 1.0)
    info.update(status=STATUS_FINISHED, last_step=last)
    write_manifest(run_dir, info)
    return run_dir
