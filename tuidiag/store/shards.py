"""Writing, listing and compacting Parquet shards, with atomic renames.

A shard is written under a hidden temporary name in its final directory and then
renamed into place (:mod:`tuidiag.store.safe_write`), so a reader sees either the whole file or nothing.
Compaction writes the merged shard the same way *before* deleting the shards it
replaces; every row keeps the ``seq`` of the flush that produced it, which lets a
tailing reader de-duplicate exactly (see :mod:`tuidiag.store.reader`).
"""

from __future__ import annotations

import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tuidiag.format import EVENTS_DIR, EVENTS_SCHEMA, METRICS_DIR, METRICS_SCHEMA, TABLE_KIND_KEY, ShardName
from tuidiag.store.safe_write import write_atomic
from tuidiag.store.decode import check_footer, check_regular_file, open_parquet
from tuidiag.store.discovery import list_shards  # noqa: F401  (listed without pyarrow there; the writer imports it from here)

COMPRESSION = "zstd"
COMPACT_MIN_FILES = 32
"""Compact once this many small shards of one rank have piled up."""
COMPACT_SMALL_BYTES = 4 * 1024 * 1024
"""Shards smaller than this are candidates for compaction."""
ROW_GROUP_ROWS = 65_536
"""Rows per row group: rows are in flush order, so each group's step statistics bound a narrow range of steps
and a reader of a few steps (a zoomed chart, the newest loss) decodes one group, not the whole shard."""


def write_table_atomic(path: Path, table: pa.Table, fsync: bool = False, root: Path | None = None,
                       row_group_rows: int = ROW_GROUP_ROWS, page_checksums: bool = False) -> None:
    """Write ``table`` to ``path`` through a temporary file and an atomic rename
    (:func:`tuidiag.store.safe_write.write_atomic`; no directory below ``root`` may be a symlink), in row groups
    of ``row_group_rows``; ``page_checksums``: a CRC with each page, for a reader that verifies them."""
    write_atomic(path, lambda handle: pq.write_table(table, handle, compression=COMPRESSION, use_dictionary=True,
                                                     row_group_size=row_group_rows, write_page_checksum=page_checksums),
                 fsync=fsync, root=root)


def plan_compaction(
    shards: list[tuple[ShardName, Path]],
    rank: int,
    min_files: int = COMPACT_MIN_FILES,
    small_bytes: int = COMPACT_SMALL_BYTES,
) -> list[tuple[ShardName, Path]]:
    """Choose the longest run of consecutive small shards of ``rank`` worth merging.

    Consecutive means adjacent in sequence order; gaps are fine (a flush with no
    events writes no events shard), overlaps are not (a compaction cut short by a
    crash can leave a merged shard beside some of its originals). Returns an empty
    list when fewer than ``min_files`` (at least 2) shards qualify.
    """
    best: list[tuple[ShardName, Path]] = []
    current: list[tuple[ShardName, Path]] = []
    for shard, path in shards:
        if shard.rank != rank or not _is_small(path, small_bytes):
            current = []
            continue
        if current and shard.first <= current[-1][0].last:
            current = []
        current.append((shard, path))
        if len(current) > len(best):
            best = list(current)
    return best if len(best) >= max(min_files, 2) else []


def _is_small(path: Path, small_bytes: int) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size < small_bytes  # never merge a FIFO or device


def compact(directory: Path, group: list[tuple[ShardName, Path]], schema: pa.Schema, root: Path | None = None) -> ShardName | None:
    """Merge ``group`` (consecutive shards of one rank) into one shard; delete the originals.

    The merged shard is in place before any original is removed, so a concurrent
    reader always finds every row in at least one file.
    """
    if len(group) < 2:
        return None
    tables = [_read(path, schema) for _, path in group]
    merged = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    merged = merged.replace_schema_metadata(schema.metadata)
    first, last = group[0][0], group[-1][0]
    name = ShardName(first.rank, first.first, last.last)
    metrics = (schema.metadata or {}).get(TABLE_KIND_KEY) == b"metrics"
    if metrics:  # its summary first: a reader that lists the merged shard finds it
        from tuidiag.store.summary_files import summary_path, write_summary

        try:
            write_summary(directory.parent, name.filename, merged, root=root)
        except (OSError, ValueError, pa.ArrowException):  # a summary only saves readers time: merge without it
            pass
    write_table_atomic(directory / name.filename, merged, root=root)
    for _, path in group:
        path.unlink(missing_ok=True)
        if metrics:
            summary_path(directory.parent, path.name).unlink(missing_ok=True)
    return name


def compact_all(run_dir: Path, rank: int) -> int:
    """Merge every run of small shards of ``rank`` in both tables of ``run_dir``, until none is left to merge;
    the number of shards merged."""
    merged = 0
    for sub, schema in ((METRICS_DIR, METRICS_SCHEMA), (EVENTS_DIR, EVENTS_SCHEMA)):
        directory = run_dir / sub
        while group := plan_compaction(list_shards(directory), rank, 2):
            if compact(directory, group, schema, root=run_dir) is None:
                break
            merged += len(group)
    return merged


def _read(path: Path, schema: pa.Schema) -> pa.Table:
    """One shard as ``schema``. Not ``pq.read_table``: that imports ``pyarrow.dataset`` and with
    it pandas (seconds, and tens of MB) into the training process that compacts. A file planted
    under a shard's name is read only once its footer passes :func:`check_footer` (``ShardError``)."""
    size = check_regular_file(path)
    with open_parquet(path) as handle:
        check_footer(handle.metadata, size)
        return handle.read().cast(schema)

