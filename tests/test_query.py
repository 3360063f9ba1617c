"""``tuidiag query``: DuckDB views over a generated sweep of real runs, checked against pandas."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import tuidiag
from tuidiag.cli.main import main
from tuidiag.format import FORMAT_VERSION_KEY
from tuidiag.store.sql_views import connect

pytest.importorskip("duckdb")

LRS = [float(lr) for lr in np.geomspace(1e-4, 1e-1, 24)]
BEST_SQL = (
    "SELECT m.run, r.config->>'lr' AS lr, min(m.value) AS best FROM metrics m JOIN runs r USING (run) "
    "WHERE m.metric = 'val/loss' GROUP BY ALL ORDER BY best"
)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 runs of 60 steps each, written by the real Recorder (``log`` only, no torch needed)."""
    root = tmp_path_factory.mktemp("sweep")
    for i, lr in enumerate(LRS):
        rng = np.random.default_rng(i)
        with tuidiag.Recorder(root / f"lr-{i:02d}", config={"lr": lr, "seed": i}, flush_interval=60.0) as rec:
            for step in range(60):
                rec.log({"train/loss": 2.0 * np.exp(-lr * step) + 0.05 * rng.random()}, step=step)
                if step % 10 == 9:
                    rec.log({"val/loss": 1.0 + abs(np.log10(lr) + 2.5) + 0.1 * rng.random()}, step=step)
    return root


def _pandas_best(root: Path) -> pd.Series:
    frames = [pd.read_parquet(run / "metrics").assign(run=run.name) for run in sorted(root.iterdir())]
    df = pd.concat(frames, ignore_index=True)
    return df[df["metric"] == "val/loss"].groupby("run")["value"].min().sort_values()


def test_best_val_loss_matches_pandas(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--root", str(sweep), "--json", BEST_SQL]) == 0
    rows = json.loads(capsys.readouterr().out)
    expected = _pandas_best(sweep)
    assert [r["run"] for r in rows] == list(expected.index)
    assert np.allclose([r["best"] for r in rows], expected.to_numpy())
    assert float(rows[0]["lr"]) == pytest.approx(LRS[int(rows[0]["run"][3:])])
    assert len(rows) == len(LRS)


def test_table_and_csv_output(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--root", str(sweep), "--csv", "SELECT run, status, last_step FROM runs ORDER BY run"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == len(LRS) and {r["status"] for r in rows} == {"finished"} and rows[0]["last_step"] == "59"
    assert main(["query", "--root", str(sweep), "--max-rows", "3", BEST_SQL]) == 0
    out = capsys.readouterr().out
    assert "best" in out.splitlines()[0] and f"{len(LRS) - 3} more rows" in out
    assert main(["query", "--root", str(sweep)]) == 0  # no SQL: the views and their columns
    assert "config JSON" in capsys.readouterr().out


def test_half_done_compaction_and_newer_files(tmp_path: Path, sweep: Path) -> None:
    run = tmp_path / "runs" / "a"
    shutil.copytree(sweep / "lr-00", run)
    shard = next((run / "metrics").glob("*.parquet"))
    first = int(shard.name.split("-")[1])
    shutil.copy(
        shard, run / "metrics" / f"r0-{first:09d}-{first + 5:09d}.parquet"
    )  # the merged copy, originals not yet gone
    table = pq.read_table(shard)
    newer = table.replace_schema_metadata({**table.schema.metadata, FORMAT_VERSION_KEY: b"99"})
    pq.write_table(newer, run / "metrics" / "r0-000000100-000000100.parquet")
    warnings: list[str] = []
    con = connect(tmp_path / "runs", warnings)
    assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == table.num_rows
    assert any("newer tuidiag" in w for w in warnings)


def test_errors_exit_2(tmp_path: Path, sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--root", str(tmp_path / "missing"), "SELECT 1"]) == 2
    assert main(["query", "--root", str(sweep), "SELECT nothing FROM metrics"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "does not exist" in err and "nothing" in err


def test_cells_are_never_markup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with tuidiag.Recorder(tmp_path / "runs" / "x", name="[bold red]evil[/] \x1b[31m") as rec:
        rec.log({"[link=x]m[/link]": 1.0}, step=0)
    assert (
        main(
            [
                "query",
                "--root",
                str(tmp_path / "runs"),
                "SELECT r.name, m.metric FROM runs r JOIN metrics m USING (run)",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "[bold red]evil[/]" in out and "[link=x]m[/link]" in out and "\x1b" not in out


def _shard(directory: Path, first: int, last: int) -> None:
    """A metrics shard holding one row per flush in ``[first, last]`` (value = seq)."""
    import pyarrow as pa

    from tuidiag.format import METRICS_SCHEMA

    seqs = list(range(first, last + 1))
    table = pa.table(
        {
            "step": seqs,
            "wall_time": [0.0] * len(seqs),
            "metric": ["m"] * len(seqs),
            "value": [float(s) for s in seqs],
            "rank": [0] * len(seqs),
            "seq": seqs,
        }
    ).cast(METRICS_SCHEMA)
    pq.write_table(table, directory / f"r0-{first:09d}-{last:09d}.parquet")


def test_partly_covered_shard_keeps_only_new_flushes(tmp_path: Path) -> None:
    metrics = tmp_path / "runs" / "a" / "metrics"
    metrics.mkdir(parents=True)
    for first, last in ((0, 3), (2, 5), (4, 4), (6, 6)):
        _shard(metrics, first, last)
    values = connect(tmp_path / "runs").execute("SELECT value FROM metrics ORDER BY value").fetchall()
    assert [v for (v,) in values] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
