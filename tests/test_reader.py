"""The reader: incremental refresh, status, bad files skipped with warnings, other readers agree."""

from __future__ import annotations

import json
import shutil

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import tuidiag
from tests.helpers import train
from tuidiag.format import FORMAT_VERSION_KEY, METRICS_SCHEMA
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store.manifest import new_manifest, write_manifest


def _write_flushes(run_dir, flushes: int, start: int = 0) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "run.json").exists():
        write_manifest(run_dir, new_manifest(run_dir.name, {}, 1, 1.0) | {"status": "finished"})
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600)
    layout = Layout(["train/loss", "lr/group0"])
    for step in range(start, start + flushes):
        writer.submit(MetricBatch(step, float(step), layout, np.array([1.0 / (step + 1), 0.1])))
        writer.flush()
    writer.close()


def test_refresh_reads_only_new_rows(run_dir) -> None:
    _write_flushes(run_dir, 3)
    run = tuidiag.open_run(run_dir)
    assert run.series("train/loss").steps.tolist() == [0, 1, 2]
    assert run.refresh() == 0
    _write_flushes(run_dir, 2, start=3)
    assert run.refresh() == 4
    assert run.series("train/loss").steps.tolist() == [0, 1, 2, 3, 4]


def test_a_trained_run_exposes_metrics_events_manifest_and_status(run_dir) -> None:
    train(run_dir, steps=20, poison_at=15)
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished"
    assert run.manifest["config"] == {"lr": 0.01}
    assert run.last_step == 19
    assert len(run.series("train/loss")) == 20
    assert {"grad_norm/total", "lr/group0", "val/loss", "val/acc", "grad/clipped"} <= set(run.metric_names)
    assert [e.kind for e in run.events if e.kind == "nonfinite"] == ["nonfinite"]
    frame = run.to_pandas()
    assert list(frame.columns) == ["step", "wall_time", "metric", "value", "rank"]
    assert len(frame) == run.rows_read


def test_pandas_and_duckdb_read_the_same_rows(run_dir) -> None:
    train(run_dir, steps=25)
    run = tuidiag.open_run(run_dir)
    ours = run.to_pandas()[["step", "metric", "value"]].sort_values(["metric", "step"]).reset_index(drop=True)
    files = sorted(str(p) for p in (run_dir / "metrics").glob("r*.parquet"))
    theirs = pd.concat([pd.read_parquet(f) for f in files])[["step", "metric", "value"]]
    theirs = theirs.astype({"metric": str}).sort_values(["metric", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
    count = duckdb.sql(f"SELECT count(*) FROM read_parquet('{run_dir}/metrics/r*.parquet')").fetchall()[0][0]
    assert count == len(ours)


def test_bad_files_are_skipped_with_warnings_and_the_rest_is_read(run_dir) -> None:
    _write_flushes(run_dir, 2)
    metrics = run_dir / "metrics"
    good = sorted(metrics.glob("r0-*.parquet"))[0].read_bytes()
    (metrics / "r0-000000100-000000100.parquet").write_bytes(good[: len(good) // 2])  # truncated
    (metrics / "r0-000000101-000000101.parquet").write_bytes(b"")  # zero bytes
    (metrics / "r0-000000102-000000102.parquet").write_bytes(b"\x00garbage" * 50)
    pq.write_table(pa.table({"a": [1, 2]}), metrics / "r0-000000103-000000103.parquet")  # foreign schema
    future = pa.table({f.name: pa.array([], f.type) for f in METRICS_SCHEMA}).replace_schema_metadata({FORMAT_VERSION_KEY: b"999"})
    pq.write_table(future, metrics / "r0-000000104-000000104.parquet")
    (metrics / "notes.txt").write_text("not a shard")
    run = tuidiag.open_run(run_dir)
    assert run.series("train/loss").steps.tolist() == [0, 1]
    assert len(run.warnings) == 5
    assert any("newer tuidiag" in w for w in run.warnings)
    run.refresh()
    assert len(run.warnings) == 5  # reported once, not on every refresh


def test_missing_or_malformed_manifest_and_vanished_directory(run_dir) -> None:
    _write_flushes(run_dir, 2)
    (run_dir / "run.json").write_text("{not json")
    run = tuidiag.Run(run_dir)
    assert run.status == "unknown"
    assert any("run.json is unreadable" in w for w in run.warnings)
    assert len(run.series("train/loss")) == 2
    shutil.rmtree(run_dir)
    assert run.refresh() == 0
    assert len(run.series("train/loss")) == 2  # keeps what it had
    assert any("missing" in w for w in run.warnings)


def test_running_run_with_dead_pid_reads_as_crashed(run_dir) -> None:
    _write_flushes(run_dir, 1)
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest.update(status="running", pid=2**22 + 12345)
    (run_dir / "run.json").write_text(json.dumps(manifest))
    assert tuidiag.open_run(run_dir).status == "crashed"
    manifest.update(pid=None, heartbeat=manifest["heartbeat"] - 3600)
    (run_dir / "run.json").write_text(json.dumps(manifest))
    assert tuidiag.open_run(run_dir).status == "crashed"


def test_find_runs_recurses_and_survives_symlink_loops(tmp_path) -> None:
    _write_flushes(tmp_path / "a" / "run1", 1)
    _write_flushes(tmp_path / "b" / "c" / "run2", 1)
    (tmp_path / "b" / "loop").symlink_to(tmp_path / "b")
    runs = tuidiag.find_runs(tmp_path)
    assert [p.name for p in runs] == ["run1", "run2"]
