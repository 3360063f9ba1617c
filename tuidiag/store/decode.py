"""Decoding one shard file into per-metric numpy chunks, validating it first.

No state lives here: :mod:`tuidiag.store.reader` decides which files and which
rows to read; this module turns a file into arrays or a clear error.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tuidiag.format import FORMAT_VERSION, FORMAT_VERSION_KEY
from tuidiag.store.limits import (
    MAX_EVENT_DATA_BYTES,
    MAX_ROWS_PER_BYTE,
    MAX_UNCOMPRESSED_PER_BYTE,
    SHARD_THRIFT_CONTAINER_ITEMS,
    SHARD_THRIFT_STRING_BYTES,
    loads_bounded,
)

SERIAL_ROWS = 65536
"""Shards of at most this many rows are decoded on the calling thread, larger ones on pyarrow's pool (:func:`_threaded`)."""


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


def read_shard(path: Path, schema: pa.Schema, columns: list[str] | None = None) -> pa.Table:
    """Read a shard and check it against ``schema``; raises :class:`ShardError`.

    ``columns`` (default: all of ``schema``) limits which columns are decoded; the
    file must still have every column of ``schema``. A file that vanished (compacted
    away after it was listed) raises ``FileNotFoundError``, not :class:`ShardError`.
    """
    return read_shard_and_metadata(path, schema, columns)[0]


def read_shard_and_metadata(path: Path, schema: pa.Schema, columns: list[str] | None = None,
                            verify_pages: bool = False) -> tuple[pa.Table, dict[bytes, bytes]]:
    """:func:`read_shard`, and the key-value metadata of the file's own schema (which the table's, cast to
    ``schema``, no longer holds), from one opening of the file. ``verify_pages``: check each page's CRC where
    the writer stored one (a damaged page raises :class:`ShardError`)."""
    with _open_shard(path, schema, verify_pages) as handle:
        try:
            table = _as(handle.read(columns=_names(schema, columns), use_threads=_threaded(handle)), _target(schema, columns))
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise ShardError(f"unreadable rows ({exc})") from exc
        return table, dict(handle.schema_arrow.metadata or {})


def _threaded(handle: pq.ParquetFile) -> bool:
    """Whether to decode on pyarrow's thread pool: for a large shard only. A live run's fresh shards hold one flush
    (hundreds of rows), which one thread decodes with about a quarter less CPU than the pool."""
    return handle.metadata.num_rows > SERIAL_ROWS


def _as(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table`` with the schema ``target``: relabelled when its columns already have those types, else cast
    (``cast`` imports ``pyarrow.compute``, a twentieth of a second the first time; tuidiag's own files never need it)."""
    if table.schema.names == target.names and all(a.type == b.type for a, b in zip(table.schema, target)):
        return pa.Table.from_arrays(table.columns, schema=target)
    return table.cast(target)


def iter_shard(path: Path, schema: pa.Schema, columns: list[str] | None = None, batch_rows: int = 65536) -> Iterator[pa.Table]:
    """:func:`read_shard` in tables of at most ``batch_rows`` rows, decoded as they are consumed.

    A file that turns out unreadable part-way raises :class:`ShardError` after
    yielding its first tables: callers that must not keep part of a file collect
    what they derive from it and keep that only once the file was read to the end.
    """
    with _open_shard(path, schema) as handle:
        target = _target(schema, columns)
        try:
            if handle.metadata.num_rows <= batch_rows:  # the usual fresh shard: one read is cheaper
                yield _as(handle.read(columns=_names(schema, columns), use_threads=_threaded(handle)), target)
                return
            for batch in handle.iter_batches(batch_size=batch_rows, columns=_names(schema, columns)):
                yield _as(pa.Table.from_batches([batch]), target)
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise ShardError(f"unreadable rows ({exc})") from exc


class _OwnedParquetFile(pq.ParquetFile):
    """A Parquet file read through a Python file object it owns and closes."""

    def close(self, force: bool = False) -> None:
        """Close the file (pyarrow leaves a file object it was given open)."""
        super().close(force=True)


def open_parquet(path: Path, **options: Any) -> pq.ParquetFile:
    """``pq.ParquetFile(path, **options)``, also for a path that is not valid UTF-8 (a directory name
    with a byte from another encoding), which pyarrow cannot name: that one is opened by Python."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the ParquetFile
        try:
            return _OwnedParquetFile(handle, **options)
        except BaseException:
            handle.close()
            raise
    return pq.ParquetFile(path, **options)


def _open_shard(path: Path, schema: pa.Schema, verify_pages: bool = False) -> pq.ParquetFile:
    """Open a shard and check its schema (format version, columns) and its footer's claims against ``schema``
    and the file's size (:func:`check_footer`); ``verify_pages``: pages with a CRC are checked as read."""
    size = check_regular_file(path)
    try:
        handle = open_parquet(
            path,
            pre_buffer=False,  # local files: pre-buffering only adds work
            page_checksum_verification=verify_pages,
            thrift_string_size_limit=SHARD_THRIFT_STRING_BYTES,
            thrift_container_size_limit=SHARD_THRIFT_CONTAINER_ITEMS,
        )
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException, ValueError) as exc:  # a mangled footer can hold invalid UTF-8
        raise ShardError(f"not a readable Parquet file ({exc})") from exc
    try:
        file_schema = handle.schema_arrow
        check_footer(handle.metadata, size)
    except (OSError, pa.ArrowException, ValueError) as exc:
        handle.close()
        raise ShardError(f"unreadable schema ({exc})") from exc
    except ShardError:
        handle.close()
        raise
    version = _format_version(file_schema)
    missing = [f.name for f in schema if f.name not in file_schema.names]
    if (version is not None and version > FORMAT_VERSION) or missing:
        handle.close()
        if version is not None and version > FORMAT_VERSION:
            raise ShardError(f"written by a newer tuidiag (format {version} > {FORMAT_VERSION}); upgrade tuidiag")
        raise ShardError(f"not a tuidiag shard (missing columns: {', '.join(missing)})")
    return handle


def check_footer(metadata: pq.FileMetaData, size: int) -> int:
    """The shard's row count, once its footer's claims are consistent and possible for a file of ``size`` bytes.

    Raises :class:`ShardError` when the file's row count differs from its row groups'
    sum, a row group or column claims a negative count or more than
    :data:`~tuidiag.store.limits.MAX_ROWS_PER_BYTE` rows per byte of file, or the
    columns claim more than :data:`~tuidiag.store.limits.MAX_UNCOMPRESSED_PER_BYTE`
    decompressed bytes per byte of file. Nothing is allocated from a count before this passes.
    """
    max_rows = max(1, size) * MAX_ROWS_PER_BYTE
    claimed, total, uncompressed = metadata.num_rows, 0, 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        rows = row_group.num_rows
        if rows < 0 or rows > max_rows:
            raise ShardError(f"footer claims {rows:,} rows in row group {group}, "
                             f"impossible in {size:,} bytes (MAX_ROWS_PER_BYTE)")
        total += rows
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            if not 0 <= chunk.num_values <= max_rows:
                raise ShardError(f"footer claims {chunk.num_values:,} values in column {chunk.path_in_schema}, "
                                 f"impossible in {size:,} bytes (MAX_ROWS_PER_BYTE)")
            uncompressed += max(0, chunk.total_uncompressed_size)
    if claimed != total or not 0 <= claimed <= max_rows:
        raise ShardError(f"footer claims {claimed:,} rows but its row groups hold {total:,}, in {size:,} bytes")
    if uncompressed > max(1, size) * MAX_UNCOMPRESSED_PER_BYTE:
        raise ShardError(f"footer claims {uncompressed:,} bytes once decompressed, from {size:,} (MAX_UNCOMPRESSED_PER_BYTE)")
    return claimed


def check_regular_file(path: Path) -> int:
    """The size of ``path``; raise :class:`ShardError` unless it is a regular file (after symlinks).

    Opening a FIFO named like a shard would block the reader forever, and a device
    such as ``/dev/zero`` never ends; a symlink loop fails here too.
    ``FileNotFoundError`` (compacted away) passes through.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ShardError(f"cannot open ({exc})") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ShardError("not a regular file (a directory, FIFO or device); not opened")
    return info.st_size


def _names(schema: pa.Schema, columns: list[str] | None) -> list[str]:
    return schema.names if columns is None else list(columns)


def _target(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    return schema if columns is None else pa.schema([schema.field(n) for n in columns], metadata=schema.metadata)


def _format_version(schema: pa.Schema) -> int | None:
    raw = (schema.metadata or {}).get(FORMAT_VERSION_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def metric_columns(table: pa.Table) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray, np.ndarray]:
    """A metrics table as numpy: metric codes, the names they index, steps, values, wall times."""
    if table.num_rows == 0:
        empty = np.empty(0, np.int64)
        return empty, [], empty, np.empty(0), np.empty(0)
    metric = table.column("metric").combine_chunks()
    if isinstance(metric, pa.ChunkedArray):
        metric = metric.chunk(0)
    return (
        to_numpy(metric.indices),
        texts(metric.dictionary),
        to_numpy(table.column("step")),
        to_numpy(table.column("value")).astype(np.float64, copy=False),
        to_numpy(table.column("wall_time")),
    )


def split_columns(codes: np.ndarray, names: list[str], steps: np.ndarray, values: np.ndarray, walls: np.ndarray) -> dict[str, Chunk]:
    """Group the rows of a metrics table, given as numpy columns (:func:`metric_columns`), by metric name,
    keeping row order within each. Metrics recorded together (one layout) have equal step and wall-time
    arrays; those chunks share one array object."""
    if not len(codes):
        return {}
    order = np.argsort(_narrow(codes, len(names)), kind="stable")  # 8/16-bit keys: a radix sort
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.diff(sorted_codes)) + 1
    steps, values, walls = steps[order], values[order], walls[order]  # one gather each; chunks are slices
    result: dict[str, Chunk] = {}
    shared_steps: list[np.ndarray] = []
    shared_walls: list[np.ndarray] = []
    for lo, hi in zip([0, *starts.tolist()], [*starts.tolist(), len(order)]):
        name = names[sorted_codes[lo]]
        result[name] = Chunk(_dedup(steps[lo:hi], shared_steps), values[lo:hi], _dedup(walls[lo:hi], shared_walls))
    return result


def to_numpy(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numeric Arrow column as a numpy array (read-only when zero-copy).

    Plain fixed-width columns without nulls are viewed directly: pyarrow's own
    ``to_numpy`` goes through its pandas shim, which imports pandas (slow, large).
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for chunk in chunks:
        kind = "i" if pa.types.is_signed_integer(chunk.type) else "u" if pa.types.is_unsigned_integer(chunk.type) else "f" if pa.types.is_floating(chunk.type) else None
        if kind is None or chunk.null_count:
            return column.to_numpy() if isinstance(column, pa.ChunkedArray) else column.to_numpy(zero_copy_only=False)
        dtype = np.dtype(f"{kind}{chunk.type.bit_width // 8}")
        parts.append(np.frombuffer(chunk.buffers()[1], dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else column.to_numpy()


def _narrow(codes: np.ndarray, size: int) -> np.ndarray:
    """Dictionary codes in the smallest unsigned type that holds them (numpy radix-sorts those)."""
    if codes.dtype.kind not in "iu" or not len(codes) or codes.min() < 0 or codes.max() >= size:
        return codes
    if size <= 256:
        return codes.astype(np.uint8)
    if size <= 65536:
        return codes.astype(np.uint16)
    return codes


def _dedup(array: np.ndarray, seen: list[np.ndarray], tries: int = 2) -> np.ndarray:
    """``array``, or an equal array already in ``seen`` (so that equal chunks share memory)."""
    for other in seen[-tries:]:
        if len(other) == len(array) and other.dtype == array.dtype and bool((other == array).all()):
            return other
    array = array.copy()  # a slice would keep the whole batch's column alive
    seen.append(array)
    return array


def texts(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A string column as Python text; bytes that are not UTF-8 are written as escapes (``\\xff``),
    never an error, and two different byte strings stay two different names."""
    try:
        return array.to_pylist()
    except UnicodeDecodeError:
        raw = array.cast(pa.binary()).to_pylist()
        return [None if v is None else v.decode("utf-8", "backslashreplace") for v in raw]


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or (pa.types.is_dictionary(kind) and pa.types.is_string(kind.value_type))


def check_text(handle: pq.ParquetFile, schema: pa.Schema) -> None:
    """Raise :class:`ShardError` when a text column of ``schema`` holds bytes that are not UTF-8
    (readers that cannot escape them, as DuckDB, refuse the whole file mid-query otherwise)."""
    names = [f.name for f in schema if _is_text(f.type)]
    try:
        table = handle.read(columns=names)
        for name in names:
            try:
                table.column(name).validate(full=True)
            except pa.ArrowInvalid as exc:
                raise ShardError(f"column {name} holds text that is not valid UTF-8 ({exc})") from exc
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise ShardError(f"unreadable rows ({exc})") from exc


def table_events(table: pa.Table) -> list[Event]:
    """Turn an events table into :class:`Event` objects; a bad ``data`` field becomes ``{}``."""
    try:
        rows = table.to_pylist()
    except UnicodeDecodeError:  # text that is not UTF-8: escape the bytes, keep the rows
        columns = {name: pa.array(texts(table.column(name)), pa.string()) if _is_text(table.column(name).type)
                   else table.column(name) for name in table.column_names}
        rows = pa.table(columns).to_pylist()
    events = []
    for row in rows:
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


RAW_DATA_CHARS = 1024
"""Characters of an event's ``data`` kept as ``{"raw": ...}`` when it is not JSON, too large or too deep."""


def _parse_data(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    if len(raw) > MAX_EVENT_DATA_BYTES:  # characters: at least as many bytes
        return {"raw": raw[:RAW_DATA_CHARS]}
    try:
        data = loads_bounded(raw, name="event data")
    except ValueError:
        return {"raw": raw[:RAW_DATA_CHARS]}
    return data if isinstance(data, dict) else {"value": data}
