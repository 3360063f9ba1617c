"""What `tuidiag query`'s sandbox costs: views over pyarrow datasets with DuckDB's external access off,
against plain `read_parquet` views with it on (the way before). 4 runs x 50 shards x 10k rows = 2M rows.

    python benchmarks/query_guard.py [--rows-per-shard 10000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tuidiag.format import METRICS_SCHEMA
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.store.sql_views import connect

QUERIES = ("SELECT metric, count(*), avg(value), max(step) FROM metrics GROUP BY metric ORDER BY metric",
           "SELECT m.run, min(m.value) FROM metrics m JOIN runs r USING (run) WHERE m.metric = 'm3' GROUP BY ALL")


def make_runs(root: Path, rows: int) -> None:
    """4 finished runs of 50 shards, 10 metrics each."""
    rng = np.random.default_rng(0)
    for r in range(4):
        run = root / f"r{r}"
        (run / "metrics").mkdir(parents=True)
        write_manifest(run, new_manifest(f"r{r}", {"lr": 0.1 * (r + 1)}, 1, 1.0) | {"status": "finished"})
        for s in range(50):
            table = pa.table({"step": np.arange(s * rows // 10, (s + 1) * rows // 10).repeat(10),
                              "wall_time": np.zeros(rows), "metric": np.tile([f"m{i}" for i in range(10)], rows // 10),
                              "value": rng.random(rows), "rank": np.zeros(rows, np.int32), "seq": np.full(rows, s)})
            pq.write_table(table.cast(METRICS_SCHEMA), run / "metrics" / f"r0-{s:09d}-{s:09d}.parquet")


def read_parquet_views(root: Path) -> duckdb.DuckDBPyConnection:
    """The way before: DuckDB reads the files itself, with external access on."""
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE runs AS SELECT 'r0' AS run WHERE false")
    parts = []
    for run in sorted(root.iterdir()):
        files = sorted(str(p) for p in (run / "metrics").glob("*.parquet"))
        con.execute("INSERT INTO runs VALUES (?)", [run.name])
        parts.append(f"SELECT '{run.name}' AS run, * FROM read_parquet({files!r}, union_by_name = true)")
    con.execute("CREATE VIEW metrics AS " + " UNION ALL ".join(parts))
    return con


def main() -> None:
    """Time both ways three times each, alternating."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows-per-shard", type=int, default=10000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_runs(root, args.rows_per_shard)
        for _ in range(3):
            for label, build in (("read_parquet, external access on", read_parquet_views),
                                 ("pyarrow datasets, external access off", connect)):
                start = time.perf_counter()
                con = build(root)
                built = time.perf_counter()
                rows = con.execute(QUERIES[0]).fetchall()
                con.execute(QUERIES[1]).fetchall()
                done = time.perf_counter()
                print(f"{label:40s} views {built - start:6.3f} s   2 queries {done - built:6.3f} s   "
                      f"rows {sum(r[1] for r in rows)}")


if __name__ == "__main__":
    main()
