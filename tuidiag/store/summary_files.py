"""Envelopes on disk: ``summaries/<shard name>`` holds the min/max levels of ``metrics/<shard name>``.

The recorder writes one for every shard it compacts (:func:`write_summary`, called by
:func:`tuidiag.store.shards.compact`), before the merged shard is renamed into place;
``tuidiag compact RUN`` writes them for the shards of older runs (:func:`build_missing`).
A reader that finds a valid summary for a shard reads it instead of the shard's rows:
a few hundred rows per metric however long the shard. A summary that is missing,
unreadable, of a newer version or not of this shard (its row count differs from the
shard's footer) is ignored and the shard is read: summaries only ever save time.

For shards without one (runs of older writers), the monitor keeps the levels it
computed in the cache directory (:func:`cached_path`), never in the run directory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from tuidiag.format import METRICS_DIR, SUMMARIES_DIR, SUMMARY_FORMAT_VERSION, SUMMARY_VERSION_KEY, TABLE_KIND_KEY
from tuidiag.format import SUMMARIES_SCHEMA  # type: ignore[attr-defined]  (built on first use)
from tuidiag.store import arrow_build
from tuidiag.store.cache_dir import cache_root, run_key
from tuidiag.store.decode import (ShardError, check_footer, check_regular_file, metric_columns, open_parquet, read_shard,
                                  read_shard_and_metadata, texts, to_numpy)
from tuidiag.store.envelope import BASE_SHIFT, Level, Pyramid, from_rows

SHARD_ROWS_KEY = b"tuidiag.shard_rows"
"""Rows of the shard a summary was computed from: a summary whose shard holds another count is not its own."""
_LEVEL_COLUMNS = ("bucket", "count", "bad", "lo", "hi", "total", "lo_pos", "first_step", "first_bad", "last_step", "last_value")


def pyramids_of(table: pa.Table) -> dict[str, Pyramid]:
    """Each metric's pyramid over the rows of a metrics table (rows in write order)."""
    codes, names, steps, values, _ = metric_columns(table)
    if not len(codes):
        return {}
    order = np.argsort(codes, kind="stable")
    codes = codes[order]
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    ends = np.append(starts[1:], len(codes))
    return {names[codes[a]]: Pyramid.of(from_rows(steps[order[a:b]], values[order[a:b]])) for a, b in zip(starts, ends)}


def summary_table(pyramids: dict[str, Pyramid], shard_rows: int) -> pa.Table:
    """The summaries table of a shard: levels coarsest first, then by metric, then by bucket."""
    names = sorted(pyramids)
    parts: list[tuple[int, int, Level]] = [(-shift, code, pyramids[name].levels[shift])
                                           for code, name in enumerate(names) for shift in pyramids[name].levels]
    parts.sort(key=lambda part: part[:2])
    lengths = [len(level) for _, _, level in parts]
    columns = {"metric": arrow_build.dictionary(np.repeat([c for _, c, _ in parts], lengths), names),
               "shift": arrow_build.numeric(np.repeat([-s for s, _, _ in parts], lengths), pa.int32())}
    for field in SUMMARIES_SCHEMA:
        if field.name in _LEVEL_COLUMNS:
            data = np.concatenate([getattr(level, field.name) for _, _, level in parts]) if parts else np.empty(0)
            columns[field.name] = arrow_build.numeric(data, field.type)
    schema = SUMMARIES_SCHEMA.with_metadata({**SUMMARIES_SCHEMA.metadata, SHARD_ROWS_KEY: str(shard_rows).encode()})
    return pa.Table.from_arrays([columns[f.name] for f in SUMMARIES_SCHEMA], schema=schema)


def summary_path(run_dir: Path, shard_filename: str) -> Path:
    """Where the summary of ``metrics/<shard_filename>`` lives."""
    return run_dir / SUMMARIES_DIR / shard_filename


def write_summary(run_dir: Path, shard_filename: str, table: pa.Table, root: Path | None = None) -> None:
    """Write the summary of the metrics shard ``shard_filename`` whose rows are ``table`` (atomically)."""
    from tuidiag.store.shards import write_table_atomic

    (run_dir / SUMMARIES_DIR).mkdir(exist_ok=True)
    write_table_atomic(summary_path(run_dir, shard_filename), summary_table(pyramids_of(table), table.num_rows), root=root,
                       page_checksums=True)  # derived data: a damaged page is noticed, and the rows read instead


def read_levels(path: Path, shard_rows: int | None, min_shift: int = BASE_SHIFT,
                finest_only: bool = False, views: bool = False) -> dict[str, dict[int, Level]]:
    """:func:`read_levels_and_metadata` without the file's metadata."""
    return read_levels_and_metadata(path, shard_rows, min_shift, finest_only, views)[0]


def read_levels_and_metadata(path: Path, shard_rows: int | None, min_shift: int = BASE_SHIFT, finest_only: bool = False,
                             views: bool = False) -> tuple[dict[str, dict[int, Level]], dict[bytes, bytes]]:
    """The levels of at least ``min_shift`` in the summary at ``path``, by metric and shift; with
    ``finest_only``, only each metric's finest of those (what a reader merging shards needs: a summary
    holds a dozen levels per metric, and building the coarser ones cost most of the time of opening a run).
    ``views``: each level's arrays are views of the file's columns, not copies (for a reader that keeps
    every level read: a copy doubled the memory of reading a whole-run file).

    Also the key-value metadata of the file's schema, from the same opening of the file.
    Raises :class:`ShardError` when it is not a valid summary of a shard of ``shard_rows`` rows
    (``None``: not checked), ``FileNotFoundError`` when there is none.
    """
    table, meta = read_shard_and_metadata(path, SUMMARIES_SCHEMA, verify_pages=True)  # validated; cast to the schema
    if meta.get(TABLE_KIND_KEY) != b"summaries" or _int(meta.get(SUMMARY_VERSION_KEY)) != SUMMARY_FORMAT_VERSION:
        raise ShardError("not a summaries table of this version")
    if shard_rows is not None and _int(meta.get(SHARD_ROWS_KEY)) != shard_rows:
        raise ShardError("a summary of another shard (row counts differ)")
    shifts = to_numpy(table.column("shift"))
    metric = table.column("metric").combine_chunks()
    metric = metric.chunk(0) if isinstance(metric, pa.ChunkedArray) else metric
    names = texts(metric.dictionary)
    all_codes = to_numpy(metric.indices)
    # checked once over every level (not level by level: a summary holds hundreds of them)
    if len(all_codes) and (np.any(all_codes < 0) or np.any(all_codes >= len(names)) or np.any(shifts < 0) or np.any(shifts > 62)):
        raise ShardError("a summary row names no metric or an impossible level")
    columns = {c: to_numpy(table.column(c)) for c in _LEVEL_COLUMNS}
    result: dict[str, dict[int, Level]] = {}
    if not len(all_codes):
        return result, meta
    # rows are grouped by (metric, shift): a group is one level, copied out of the table (a view would keep every
    # level of the file alive until the shards' levels are merged)
    same_key = (all_codes[1:] == all_codes[:-1]) & (shifts[1:] == shifts[:-1])
    bucket = columns["bucket"]
    if np.any(same_key & (bucket[1:] <= bucket[:-1])) or np.any(columns["count"] < 0) or np.any(columns["bad"] < 0):
        raise ShardError("a summary's buckets are out of order or its counts negative")
    key_change = np.flatnonzero(~same_key) + 1
    groups = [(int(all_codes[a]), int(shifts[a]), int(a), int(b))
              for a, b in zip(np.concatenate(([0], key_change)), np.append(key_change, len(all_codes)))]
    groups = [group for group in groups if group[1] >= min_shift]
    if finest_only:
        finest: dict[int, int] = {}
        for code, shift, _, _ in groups:
            finest[code] = min(shift, finest.get(code, shift))
        groups = [group for group in groups if group[1] == finest[group[0]]]
    take = (lambda values: values) if views else np.array
    for code, shift, a, b in groups:
        level = Level(shift, *(take(columns[c][a:b]) for c in _LEVEL_COLUMNS))
        result.setdefault(str(names[code]), {})[shift] = level
    return result, meta


def shard_rows(path: Path) -> int:
    """The row count a shard's footer states (after :func:`check_footer`)."""
    return shard_footer(path)[0]


def shard_footer(path: Path) -> tuple[int, np.ndarray, np.ndarray]:
    """From one opening of a metrics shard's footer: its row count (after :func:`check_footer`), and the
    (steps, wall times) its row groups' statistics state, each group's first and last, when they have both
    (empty arrays otherwise): when the rows were written, without reading them."""
    size = check_regular_file(path)
    with open_parquet(path, pre_buffer=False) as handle:
        rows = check_footer(handle.metadata, size)
        names = handle.schema_arrow.names
        steps: list[float] = []
        walls: list[float] = []
        if "step" in names and "wall_time" in names:
            step_column, wall_column = names.index("step"), names.index("wall_time")
            for group in range(handle.metadata.num_row_groups):
                columns = handle.metadata.row_group(group)
                step, wall = columns.column(step_column).statistics, columns.column(wall_column).statistics
                if step is not None and wall is not None and step.has_min_max and wall.has_min_max:
                    steps += [float(step.min), float(step.max)]
                    walls += [float(wall.min), float(wall.max)]
        return rows, np.array(steps, np.float64), np.array(walls, np.float64)


def cached_path(run_dir: Path, shard: Path) -> Path | None:
    """Where the monitor keeps the levels it computed for ``shard`` of a run without summaries (``None``: the
    shard is gone). The name holds the shard's size and modification time: a replaced file is never matched."""
    try:
        info = shard.stat()
    except OSError:
        return None
    return cache_root() / SUMMARIES_DIR / run_key(run_dir) / f"{shard.name}.{info.st_size}-{info.st_mtime_ns}"


def write_cached(path: Path, pyramids: dict[str, Pyramid], rows: int) -> None:
    """Keep computed levels in the cache (an unwritable cache only costs time)."""
    from tuidiag.store.shards import write_table_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_table_atomic(path, summary_table(pyramids, rows), page_checksums=True)
    except OSError:
        pass


def build_missing(run_dir: Path, in_cache: bool = False) -> int:
    """Write the summary of every metrics shard of ``run_dir`` that has none (or an invalid one); returns how many.

    ``in_cache``: the run must stay as it is (read-only): the summaries go where the monitor keeps the levels
    it computes (:func:`cached_path`), which it reads as it reads a run's own."""
    from tuidiag.format import METRICS_SCHEMA  # type: ignore[attr-defined]
    from tuidiag.store.discovery import list_shards

    written = 0
    for _, path in list_shards(run_dir / METRICS_DIR):
        where = cached_path(run_dir, path) if in_cache else summary_path(run_dir, path.name)
        if where is None:
            continue  # compacted away meanwhile
        try:
            rows = shard_rows(path)
            if _valid(summary_path(run_dir, path.name), rows) or (in_cache and _valid(where, rows)):
                continue
            table = read_shard(path, METRICS_SCHEMA, ["step", "wall_time", "metric", "value"])
        except (FileNotFoundError, ShardError):
            continue  # unreadable or compacted away: its rows are read (or skipped) as before
        if in_cache:
            from tuidiag.store.shards import write_table_atomic

            where.parent.mkdir(parents=True, exist_ok=True)
            write_table_atomic(where, summary_table(pyramids_of(table), table.num_rows), page_checksums=True)
        else:
            write_summary(run_dir, path.name, table, root=run_dir)
        written += 1
    return written


def _valid(path: Path, rows: int) -> bool:
    """Whether ``path`` holds a valid summary of a shard of ``rows`` rows."""
    try:
        read_levels(path, rows, min_shift=62)
    except (FileNotFoundError, ShardError):
        return False
    return True


def _int(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None
