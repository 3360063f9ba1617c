"""One flush of the writer: its shard holds the batches' rows in order, and the summary of ``run.json`` what they say.

The rows of a flush are joined once, for the table written, and the tail summary reads
that same join. Hypothesis plans flushes of batches of several rows (tracked and other
names, steps out of order, NaN); each shard must hold exactly the batches' rows in the
order submitted, and the summary the newest row of each tracked metric, computed here
from the plan alone.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.format import METRICS_DIR, ShardName
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store.tail_summary import TRACKED

NAMES = [*TRACKED, "other", "val/acc"]
value = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), st.floats(-10, 10))
batch = st.tuples(st.integers(0, 30), st.lists(st.tuples(st.sampled_from(NAMES), value), min_size=1, max_size=5,
                                                unique_by=lambda row: row[0]))
plans = st.lists(st.lists(batch, min_size=1, max_size=6), min_size=1, max_size=4)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans)
def test_each_flush_writes_its_rows_in_order_and_summarises_them(tmp_path_factory: pytest.TempPathFactory,
                                                                 plan: list[list[tuple[int, list[tuple[str, float]]]]]) -> None:
    run_dir = tmp_path_factory.mktemp("flush") / "run"
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=10_000)
    newest: dict[str, tuple[int, float, float]] = {}
    for seq, flush in enumerate(plan):
        for step, rows in flush:
            names = [name for name, _ in rows]
            wall = 1.7e9 + step + seq
            writer.submit(MetricBatch(step, wall, Layout(names), np.array([v for _, v in rows])), len(rows))
            for name, v in rows:
                if name in TRACKED and (name not in newest or step >= newest[name][0]):
                    newest[name] = (step, v, wall)
        writer.flush()
        table = pq.read_table(run_dir / METRICS_DIR / ShardName(0, seq, seq).filename)
        expected = [(step, name, v) for step, rows in flush for name, v in rows]
        got = list(zip(table.column("step").to_pylist(), table.column("metric").to_pylist(), table.column("value").to_pylist()))
        assert [(s, n) for s, n, _ in got] == [(s, n) for s, n, _ in expected]
        assert all(_same(a, b) for (_, _, a), (_, _, b) in zip(got, expected))
        assert set(table.column("seq").to_pylist()) == {seq} and set(table.column("rank").to_pylist()) == {0}
    writer.close()
    summary = writer.tail.to_json()
    assert summary["rows"] == sum(len(rows) for flush in plan for _, rows in flush)
    assert summary["seq"] == len(plan) - 1
    assert set(summary["last"]) == set(newest)
    for name, (step, v, wall) in newest.items():
        got_step, got_value, got_wall = summary["last"][name]
        assert (got_step, got_wall) == (step, wall)
        assert _same(float(got_value), v)  # a non-finite value as its text: "nan", "inf"


@pytest.mark.parametrize("queued_after_drain", [1, 5, 50])
def test_a_flush_returns_once_its_own_rows_are_written_not_an_earlier_write(tmp_path, queued_after_drain: int) -> None:
    """A periodic write that drained the queue before ``flush()`` was called must not end that flush: the
    rows stepped after its drain were still queued. (Under load a SIGKILL right after ``flush()`` lost them.)"""
    import threading

    import tuidiag

    rec = tuidiag.Recorder(tmp_path / "run", flush_interval=0.05)
    writer = rec._writer
    entered, gate = threading.Event(), threading.Event()
    write = writer._write_pending

    def slow_write() -> None:  # a slow disk: the periodic write holds until the flush has been asked for
        if not gate.is_set():
            entered.set()
            gate.wait(30)
        write()

    for _ in range(10):
        rec.step(1.0)
    writer._write_pending = slow_write
    assert entered.wait(30)  # a periodic write has drained what was queued and is writing it
    for _ in range(queued_after_drain):
        rec.step(1.0)
    flushed = threading.Thread(target=rec.flush, args=(30,))
    flushed.start()
    with writer._flushes:
        assert writer._flushes.wait_for(lambda: writer._asked >= 1, 30)  # the flush holds its ticket
    gate.set()
    flushed.join(30)
    steps = tuidiag.open_run(tmp_path / "run").series("train/loss").steps
    assert steps.tolist() == list(range(10 + queued_after_drain))  # every row stepped before flush() is on disk
    rec.close()
