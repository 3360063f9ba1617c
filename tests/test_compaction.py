"""Compaction while a reader tails: no row missing, none counted twice."""

from __future__ import annotations

import threading

import numpy as np

import tuidiag
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter


def test_compaction_racing_a_reader_loses_and_duplicates_nothing(run_dir) -> None:
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=4)
    layout = Layout(["train/loss"])
    total = 400
    done = threading.Event()

    def produce() -> None:
        for step in range(total):
            writer.submit(MetricBatch(step, float(step), layout, np.array([float(step)])))
            writer.flush()
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    run = tuidiag.open_run(run_dir)
    while not done.is_set():
        run.refresh()
        steps = run.series("train/loss").steps
        assert len(np.unique(steps)) == len(steps), "a row was read twice"
    producer.join()
    writer.close()
    run.refresh()
    steps = run.series("train/loss").steps
    assert steps.tolist() == list(range(total))
    assert len(list((run_dir / "metrics").glob("*.parquet"))) < 10  # compacted
