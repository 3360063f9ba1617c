"""Writing a run's whole-run file (:mod:`tuidiag.store.whole_summary`): at a training's close and by ``tuidiag compact``."""

from __future__ import annotations

from pathlib import Path

from tuidiag.format import EVENT_RESUMED, EVENTS_DIR, EVENTS_SCHEMA, METRICS_DIR  # type: ignore[attr-defined]
from tuidiag.store.decode import ShardError, read_shard
from tuidiag.store.discovery import list_shards
from tuidiag.store.envelope_run import EnvelopeRun
from tuidiag.store.summary_files import summary_path
from tuidiag.store.whole_summary import whole_path, whole_table

WHOLE_MAX_ROW_BYTES = 8 * 1024 * 1024
"""Bytes of shards without a summary :func:`write_whole` reads rows from at most (a few fresh flushes): beyond, it
writes nothing, so a training's close never waits on decoding a long run."""


def write_whole(run_dir: Path, rank: int) -> bool:
    """Write the whole-run file of ``rank`` (:mod:`tuidiag.store.whole_summary`) of a run whose metrics are all
    of that rank, from its shards (their summaries where valid); whether it was written. Not for runs a later
    session resumed (their views read rows), nor of one shard, nor with more than :data:`WHOLE_MAX_ROW_BYTES` of
    shards without a summary, nor when the file there already stands for every shard read."""
    shards = list_shards(run_dir / METRICS_DIR)
    if len(shards) < 2 or any(shard.rank != rank for shard, _ in shards):
        return False  # one shard: its summary (or its few rows) is as quick to read
    try:
        unsummarised = sum(path.stat().st_size for _, path in shards if not summary_path(run_dir, path.name).exists())
    except OSError:
        return False  # compacted meanwhile: a later close or compact writes it
    if unsummarised > WHOLE_MAX_ROW_BYTES:
        return False  # rows to decode first: never at a training's exit (tuidiag compact writes their summaries first)
    if _resumed(run_dir):
        return False  # its view reads rows (a later session replaced steps): the file would not be opened
    run = EnvelopeRun(run_dir, cache=False)  # a training's close writes nothing into the monitor's cache
    if run.resume_steps or run.ranks != [rank] or not run.covered or run.whole_shards == len(run.covered):
        return False
    from tuidiag.store.shards import write_table_atomic

    pyramids = {name: pyramid for name in run.metric_names if (pyramid := run.pyramid(name, rank)) is not None}
    whole_path(run_dir, rank).parent.mkdir(exist_ok=True)
    table = whole_table(pyramids, run.covered, run.wall_marks())
    # one row group: each column is read as one array and viewed, not joined from parts into a copy
    write_table_atomic(whole_path(run_dir, rank), table, root=run_dir, row_group_rows=max(1, table.num_rows),
                       page_checksums=True)
    return True


def _resumed(run_dir: Path) -> bool:
    """Whether a later session resumed the run (a ``resumed`` event), from the events shards' kinds only (a few rows)."""
    for _, path in list_shards(run_dir / EVENTS_DIR):
        try:
            kinds = read_shard(path, EVENTS_SCHEMA, ["kind"]).column("kind").to_pylist()
        except (FileNotFoundError, ShardError):
            continue
        if EVENT_RESUMED in kinds:
            return True
    return False
