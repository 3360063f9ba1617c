"""``tuidiag query "SQL" [--root runs]``: DuckDB over every run's shards, printed as a table, CSV or JSON.

Views: ``runs`` (one row per run, from ``run.json``; ``config`` and ``manifest`` as
JSON), ``metrics`` (alias ``scalars``) and ``events``, each with a ``run`` column.
Without SQL, lists the views and their columns. A query reads the runs and nothing
else: no file is written, no other file, URL or extension is reached, unless
``--allow-writes`` is given.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tuidiag.cli.run_argument import fail
from tuidiag.text.safe import clean, escaped, literal

VIEWS = ("runs", "metrics", "events")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``query`` arguments."""
    parser.add_argument(
        "sql",
        nargs="?",
        help="a DuckDB query over the views runs, metrics (alias scalars), events; omit it to list their columns",
    )
    parser.add_argument("--root", default="runs", help="directory of runs (default: ./runs)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--csv", action="store_true", help="print CSV")
    output.add_argument("--json", action="store_true", help="print a JSON list of objects")
    parser.add_argument(
        "--max-rows", type=int, default=1000, help="rows shown in the table (default 1000; CSV/JSON: all)"
    )
    parser.add_argument(
        "--allow-writes",
        action="store_true",
        help="let the SQL write files and read other files, URLs and extensions (COPY ... TO, ATTACH, read_csv, "
        "INSTALL); by default a query reads the runs under --root and nothing else",
    )


def run(args: argparse.Namespace) -> int:
    """Run the query; exit 2 when the root is missing, DuckDB is missing or the SQL fails."""
    from tuidiag.store.sql_views import QueryUnavailable, connect

    root = Path(args.root)
    if not root.exists():
        return fail("query", f"{root} does not exist")
    warnings: list[str] = []
    try:
        con = connect(root, warnings, allow_external=args.allow_writes)
        sql = args.sql if args.sql else _schema_sql()
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchall() if columns else []
    except QueryUnavailable as exc:
        return fail("query", str(exc))
    except Exception as exc:  # duckdb.Error and its subclasses: a bad query or an unreadable file
        return fail("query", f"{type(exc).__name__}: {exc}")
    for warning in warnings:
        print(f"tuidiag query: warning: {clean(warning, 2000)}", file=sys.stderr)
    if args.csv:
        write_csv(columns, rows)
    elif args.json:
        print(json.dumps([dict(zip(columns, map(json_value, row), strict=True)) for row in rows], default=str))
    else:
        print_table(columns, rows, args.max_rows)
    return 0


def _schema_sql() -> str:
    names = ", ".join(f"'{v}'" for v in (*VIEWS, "scalars"))
    return (
        "SELECT table_name AS view, string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position) "
        f"AS columns FROM information_schema.columns WHERE table_name IN ({names}) GROUP BY table_name ORDER BY view"
    )


def json_value(value: Any) -> Any:
    """A JSON-safe cell: non-finite floats as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (as in run.json)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def text_cell(value: Any) -> str:
    """A cell as text: floats with 6 significant digits, NULL as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


def write_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Rows as CSV on stdout (floats in full precision); control characters in text are written as
    escapes (``\\x1b``), so text from run files never drives the terminal."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow([escaped(c) for c in columns])
    writer.writerows([csv_cell(v) for v in row] for row in rows)


def csv_cell(value: Any) -> Any:
    """A cell for the CSV writer: NULL as empty, text escaped (:func:`~tuidiag.text.safe.escaped`)."""
    if value is None:
        return ""
    return escaped(value) if isinstance(value, str) else value


def print_table(columns: list[str], rows: list[tuple[Any, ...]], max_rows: int) -> None:
    """Rows as a Rich table; every cell is literal text (never markup)."""
    console = Console(highlight=False)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in columns:
        table.add_column(literal(name, max_len=60))
    for row in rows[: max(0, max_rows)]:
        table.add_row(*(literal(text_cell(v), max_len=200) for v in row))
    console.print(table)
    if len(rows) > max_rows:
        console.print(
            literal(f"... {len(rows) - max_rows} more rows (--max-rows, --csv or --json for all)"), style="dim"
        )
