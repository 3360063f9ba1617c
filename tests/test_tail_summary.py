"""The summary of the newest rows the recorder keeps in ``run.json``: it says what the shards say, and
``tuidiag status`` reads it without importing pyarrow, numpy or pandas."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tuidiag.format import LOSS, MANIFEST_NAME
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store.tail_summary import TRACKED, TailKeeper, current_summary, newest, read_summary, tail_spark

ROOT = Path(__file__).resolve().parent.parent
NAMES = [*TRACKED, "other"]
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), st.floats(-10, 10))
flushes = st.lists(  # each flush: rows of (step, metric index, value), written in this order
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, len(NAMES) - 1), values), max_size=12), min_size=1, max_size=5)


def _write(run_dir: Path, plan: list[list[tuple[int, int, float]]]) -> TailKeeper:
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=3)
    layouts = {i: Layout([name]) for i, name in enumerate(NAMES)}
    for rows in plan:
        for step, which, value in rows:
            writer.submit(MetricBatch(step, 1.7e9 + step, layouts[which], np.array([value])))
        writer.flush()
    writer.close()
    return writer.tail


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=flushes)
def test_summary_says_what_the_shards_say(tmp_path_factory: pytest.TempPathFactory, plan: list[list[tuple[int, int, float]]]) -> None:
    """Whatever rows, steps out of order, NaN and infinities, flushes and compactions: the newest row of each
    tracked metric in the summary is the reader's last row of the series."""
    run_dir = tmp_path_factory.mktemp("tail") / "run"
    keeper = _write(run_dir, plan)
    manifest = {"summary": json.loads(json.dumps(keeper.to_json(), allow_nan=False))}  # as run.json holds it
    summary = current_summary(run_dir, manifest)
    assert summary is not None and summary.rows == sum(len(rows) for rows in plan)
    run = tuidiag.open_run(run_dir)
    for name in TRACKED:
        series, from_summary = run.series(name), summary.last.get(name)
        assert (len(series) == 0) == (from_summary is None)
        if len(series):
            assert (from_summary.step, from_summary.wall_time) == (series.steps[-1], series.wall_times[-1])
            assert (math.isnan(from_summary.value) and math.isnan(series.values[-1])) or from_summary.value == series.values[-1]


def test_spark_and_pace_match_the_whole_series(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        for step in range(1100):
            rec.log({"train/loss": 1.0 / (step + 1) if step % 97 else math.nan}, step=step)
            if step % 400 == 0:
                rec.flush()
    manifest = json.loads((tmp_path / "run" / MANIFEST_NAME).read_text())
    summary = read_summary(manifest)
    loss = tuidiag.open_run(tmp_path / "run").series(LOSS)
    assert summary is not None and summary.spark == pytest.approx(tuple(tail_spark(loss.values)), rel=1e-9)
    assert summary.last[LOSS].step == 1099 and summary.rows == 1100
    assert summary.steps_per_s is None or summary.steps_per_s > 0


def test_a_summary_behind_the_shards_is_not_trusted(tmp_path: Path) -> None:
    """A newer shard than the summary covers (another tool wrote it, a crash before run.json): read the shards."""
    run_dir = tmp_path / "run"
    keeper = _write(run_dir, [[(1, 0, 0.5)]])
    stale = {"summary": keeper.to_json()}
    _write(run_dir, [[(2, 0, 0.25)]])  # a second writer: a shard the summary does not cover
    assert current_summary(run_dir, stale) is None
    assert newest(run_dir, stale, LOSS).value == 0.25
    assert newest(run_dir, {}, LOSS).value == 0.25  # a run of format 1 without a summary: read from the shards


@pytest.mark.parametrize("block", [
    None, 3, [], {"version": 2, "seq": 0, "rows": 0}, {"version": 1, "seq": "0", "rows": 0},
    {"version": 1, "seq": 0, "rows": 0, "last": {LOSS: [1, "x", 2.0]}, "spark": ["a", 1e400, 2.0], "steps_per_s": -1},
    {"version": 1, "seq": 2**70, "rows": 0}, {"version": True, "seq": 0, "rows": 0}, {"version": 1, "seq": 0, "rows": 0},
])
def test_malformed_summaries_are_ignored(block: object) -> None:
    summary = read_summary({"summary": block})
    assert summary is None or (summary.last == {} and summary.spark in ((), (2.0,)) and summary.steps_per_s is None)


def test_status_imports_neither_pyarrow_nor_numpy(tmp_path: Path) -> None:
    """The status line of a recorded run, with its cached finding, in a fresh interpreter: no pyarrow, numpy or pandas."""
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        for step in range(50):
            rec.step(1.0 / (step + 1))
    env = {"PYTHONPATH": str(ROOT), "TUIDIAG_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    check = ("import sys; from tuidiag.cli.main import main; main(['status', '--ascii', sys.argv[1]]); "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow', 'numpy', 'pandas', 'torch'}))")
    first = subprocess.run([sys.executable, "-c", check, str(tmp_path / "run")], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.startswith("run > step 49 loss 0.02 > healthy > finished")  # the first call diagnoses inline
    again = subprocess.run([sys.executable, "-c", check, str(tmp_path / "run")], env=env, capture_output=True, text=True, check=True)
    line, modules = again.stdout.splitlines()
    assert line.startswith("run > step 49 loss 0.02 > healthy > finished") and modules == "[]"
