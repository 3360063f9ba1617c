"""SQL over every run under a root: DuckDB views ``runs``, ``metrics`` (alias ``scalars``) and ``events``.

Each view has a ``run`` column, the run directory's path relative to the root.
Shards are chosen as the incremental reader chooses them (``docs/format.md``,
section 4): one file per ``(rank, seq)``, so a compaction caught half-way never
doubles rows. Files of a newer format or missing columns are skipped with a
warning. DuckDB is imported only here, and only when a query runs: it is the
optional extra ``tuidiag[query]``. The shards are read through pyarrow datasets and
DuckDB's own file and network access is then switched off (:func:`connect`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidiag.format import EVENTS_DIR, EVENTS_SCHEMA, METRICS_DIR, METRICS_SCHEMA
from tuidiag.store.decode import ShardError, _open_shard, check_text
from tuidiag.store.discovery import find_runs
from tuidiag.store.manifest import effective_status, jsonable, read_manifest
from tuidiag.store.seqset import SeqSet
from tuidiag.store.shards import list_shards
from tuidiag.text.safe import escape_surrogates

COLUMNS = {
    METRICS_DIR: ("step BIGINT", "wall_time DOUBLE", "metric VARCHAR", "value DOUBLE", "rank INTEGER", "seq BIGINT"),
    EVENTS_DIR: (
        "step BIGINT",
        "wall_time DOUBLE",
        "kind VARCHAR",
        "severity VARCHAR",
        "message VARCHAR",
        "data VARCHAR",
        "rank INTEGER",
        "seq BIGINT",
    ),
}
RUNS_COLUMNS = (
    "run VARCHAR",
    "name VARCHAR",
    "path VARCHAR",
    "status VARCHAR",
    "run_id VARCHAR",
    "created DOUBLE",
    "heartbeat DOUBLE",
    "ended DOUBLE",
    "last_step BIGINT",
    "world_size INTEGER",
    "config JSON",
    "hparams JSON",
    "manifest JSON",
)


class QueryUnavailable(Exception):
    """DuckDB is not installed."""


@dataclass
class Scan:
    """Files of one run's table read together, minus flushes another file already supplied."""

    files: list[Path]
    excluded: list[tuple[int, int]] = field(default_factory=list)
    """Inclusive ``seq`` ranges to drop (only for a shard partly covered by a wider one)."""


def select_shards(directory: Path, schema: Any, warnings: list[str]) -> list[Scan]:
    """Scans that read each ``(rank, seq)`` of a table directory from exactly one readable file."""
    shards = sorted(list_shards(directory), key=lambda item: (item[0].rank, item[0].first, -item[0].last))
    seen: dict[int, SeqSet] = {}
    whole, partial = [], []
    for shard, path in shards:
        done = seen.setdefault(shard.rank, SeqSet())
        if done.covers(shard.first, shard.last) or not _nameable(path, warnings) or not _readable(path, schema, warnings):
            continue
        if done.overlaps(shard.first, shard.last):
            partial.append(Scan([path], done.held_within(shard.first, shard.last)))
        else:
            whole.append(path)
        done.add_range(shard.first, shard.last)
    return ([Scan(whole)] if whole else []) + partial


def _nameable(path: Path, warnings: list[str]) -> bool:
    """True when the path is valid UTF-8 (DuckDB takes file names as text); a warning names it otherwise."""
    try:
        str(path).encode("utf-8")
        return True
    except UnicodeEncodeError:
        warnings.append(f"skipped {escape_surrogates(str(path))}: its name is not valid UTF-8, which DuckDB cannot open")
        return False


def _readable(path: Path, schema: Any, warnings: list[str]) -> bool:
    """True when the file is a shard this reader understands; a warning names it otherwise."""
    try:
        with _open_shard(path, schema) as handle:
            check_text(handle, schema)
        return True
    except FileNotFoundError:
        return False
    except ShardError as exc:
        warnings.append(f"skipped {path}: {exc}")
        return False


def _literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _scan_sql(run: str, scan: Scan, table: str, relation: str) -> str:
    """``SELECT`` of one scan (registered as ``relation``) with the run's name as a column."""
    names = ", ".join(f"CAST({name} AS {kind}) AS {name}" for name, kind in (c.split() for c in COLUMNS[table]))
    where = " AND ".join(f"NOT (seq BETWEEN {a} AND {b})" for a, b in scan.excluded) or "true"
    return f"SELECT {_literal(run)} AS run, {names} FROM {relation} WHERE {where}"


def _dataset(scan: Scan, schema: Any) -> Any:
    """The scan's files as a lazy pyarrow dataset (missing columns read as NULL, like ``union_by_name``).

    pyarrow reads the files, not DuckDB: the connection can then be closed to every file."""
    import pyarrow.dataset as ds

    return ds.dataset([str(p) for p in scan.files], schema=schema.remove_metadata(), format="parquet")


def _empty_sql(table: str) -> str:
    columns = ", ".join(f"NULL::{c.split()[1]} AS {c.split()[0]}" for c in ("run VARCHAR", *COLUMNS[table]))
    return f"SELECT {columns} WHERE false"


def _run_label(path: Path, root: Path) -> str:
    try:
        label = path.relative_to(root).as_posix()
    except ValueError:
        label = path.as_posix()
    return escape_surrogates(path.name if label in ("", ".") else label)


def _run_row(path: Path, label: str, warnings: list[str]) -> tuple[Any, ...]:
    """One row of the ``runs`` view from ``run.json`` (NULLs when it is missing or unreadable).

    Every value fits its column or is NULL: a field of another type, a number beyond the
    column's range, or text holding lone surrogates (escaped as ``\\udXXX``) never fails the query.
    """
    try:
        manifest = read_manifest(path)
    except (OSError, ValueError) as exc:
        warnings.append(f"{path}: run.json unreadable ({exc})")
        manifest = {}
    get = manifest.get
    status = effective_status(manifest) if manifest else "unknown"
    config = get("config") if isinstance(get("config"), dict) else {}
    hparams = get("hparams") if isinstance(get("hparams"), dict) else None
    return (
        label,
        escape_surrogates(str(get("name") or path.name)),
        escape_surrogates(str(path)),
        escape_surrogates(status),
        escape_surrogates(str(get("run_id"))) if get("run_id") is not None else None,
        _number(get("created")),
        _number(get("heartbeat")),
        _number(get("ended")),
        _integer(get("last_step"), 63),
        _integer(get("world_size"), 31),
        _json(config),
        _json(hparams) if hparams is not None else None,
        _json(manifest),
    )


def _json(value: Any) -> str:
    """``value`` as JSON that DuckDB accepts: non-finite numbers as strings (as ``jsonable`` writes
    them), lone surrogates as the text ``\\udXXX`` (DuckDB refuses them even escaped)."""
    return escape_surrogates(json.dumps(jsonable(value), ensure_ascii=False), backslash="\\\\")


def _number(value: Any) -> float | None:
    """``value`` as a DOUBLE, or None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _integer(value: Any, bits: int) -> int | None:
    """``value`` when it is an integer that fits a signed ``bits + 1``-bit column, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**bits) <= value < 2**bits:
        return None
    return value


def connect(root: str | Path, warnings: list[str] | None = None, allow_external: bool = False) -> Any:
    """An in-memory DuckDB connection with views over every run at or below ``root``.

    The views read the shards through pyarrow; once they exist, DuckDB's own access to
    files, the network and extensions is switched off and the setting locked
    (``enable_external_access = false``, ``lock_configuration = true``): a query reads
    the runs and nothing else, and writes nothing (no ``COPY ... TO``, ``ATTACH``,
    ``read_csv('/etc/...')``, ``INSTALL``). ``allow_external`` leaves it on.
    """
    try:
        import duckdb
    except ImportError as exc:
        raise QueryUnavailable("tuidiag query needs DuckDB: pip install 'tuidiag[query]'") from exc
    warnings = [] if warnings is None else warnings
    root = Path(root)
    con = duckdb.connect(":memory:")
    con.execute(f"CREATE TABLE runs ({', '.join(RUNS_COLUMNS)})")
    selects: dict[str, list[str]] = {METRICS_DIR: [], EVENTS_DIR: []}
    for path in find_runs(root):
        label = _run_label(path, root)
        con.execute(f"INSERT INTO runs VALUES ({', '.join('?' * len(RUNS_COLUMNS))})", _run_row(path, label, warnings))
        for table, schema in ((METRICS_DIR, METRICS_SCHEMA), (EVENTS_DIR, EVENTS_SCHEMA)):
            for scan in select_shards(path / table, schema, warnings):
                relation = f"_{table}_scan_{len(selects[table])}"
                con.register(relation, _dataset(scan, schema))
                selects[table].append(_scan_sql(label, scan, table, relation))
    for table, parts in selects.items():
        con.execute(f"CREATE VIEW {table} AS " + (" UNION ALL ".join(parts) if parts else _empty_sql(table)))
    con.execute(f"CREATE VIEW scalars AS SELECT * FROM {METRICS_DIR}")
    if not allow_external:
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


__all__ = ["QueryUnavailable", "Scan", "connect", "select_shards"]
