"""The overview row of a run comes from ``run.json`` alone: the same row the whole read gave, without reading a shard."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tuidiag.diagnosis import diagnose
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store import reader
from tuidiag.store.manifest import new_manifest, read_manifest, write_manifest
from tuidiag.store.tail_summary import current_summary
from tuidiag.viewmodel.model import RunsModel
from tuidiag.viewmodel.snapshot import PENDING, summarize, summarize_tail

losses = st.one_of(st.floats(1e-6, 1e6), st.just(math.nan), st.just(math.inf))
plans = st.lists(st.tuples(losses, st.booleans(), st.booleans()), min_size=1, max_size=60)
"""Each step: the loss, whether LR and gradient norm are logged too, whether a flush follows."""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


def _write(run_dir: Path, plan: list[tuple[float, bool, bool]], status: str) -> None:
    """The rows through the real shard writer, and the ``run.json`` a recorder writes beside them."""
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=4)
    loss, three = Layout(["train/loss"]), Layout(["train/loss", "lr/group0", "grad_norm/total"])
    for step, (value, others, flush) in enumerate(plan):
        values = [value, 0.1 / (step + 1), value * 2] if others else [value]
        writer.submit(MetricBatch(step, time.time(), three if others else loss, np.array(values)))
        if flush:
            writer.flush()
    writer.close()
    manifest = new_manifest(run_dir.name, {}, 1, 1.0)
    manifest.update(status=status, last_step=writer.last_step, summary=writer.tail.to_json())
    write_manifest(run_dir, manifest)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans, status=st.sampled_from(["running", "finished", "failed"]))
def test_row_from_run_json_is_the_row_of_the_whole_read(tmp_path_factory: pytest.TempPathFactory,
                                                       plan: list[tuple[float, bool, bool]], status: str) -> None:
    run_dir = tmp_path_factory.mktemp("row") / "run"
    _write(run_dir, plan, status)
    manifest = read_manifest(run_dir)
    tail = current_summary(run_dir, manifest)
    assert tail is not None
    run = tuidiag.open_run(run_dir)
    now = time.time()
    whole, light = summarize(run, diagnose(run), now), summarize_tail(run_dir, manifest, tail, PENDING, now)
    assert (light.name, light.status, light.step, light.spark) == (whole.name, whole.status, whole.step, whole.spark)
    assert _same(light.last_loss, whole.last_loss) and _same(light.lr, whole.lr) and _same(light.grad_norm, whole.grad_norm)
    assert light.steps_per_s == pytest.approx(whole.steps_per_s) and light.data_age == pytest.approx(whole.data_age)
    assert light.recorder_losses == whole.recorder_losses


def test_overview_reads_no_shard_and_takes_health_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "runs"
    for i in range(3):
        _write(root / f"run{i}", [(1.0 / (s + 1), True, s % 7 == 0) for s in range(40)], "finished")
    first = RunsModel(root)
    first.discover()
    assert {s.health for s in first.refresh()} <= {"-", "healthy"}  # listed at once; the diagnoses follow on their thread
    deadline = time.monotonic() + 30
    while any(s.health == "-" for s in first.summaries()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [s.health for s in first.summaries()] == ["healthy"] * 3

    def no_shard(*args: object, **kwargs: object) -> None:
        raise AssertionError("the overview read a shard")

    monkeypatch.setattr(reader.Run, "refresh", no_shard)
    again = RunsModel(root)  # a new monitor: the diagnoses come from the cache the first one wrote
    again.discover()
    rows = again.refresh()
    assert [(s.step, s.last_loss) for s in rows] == [(39, 1 / 40)] * 3
    deadline = time.monotonic() + 30
    while any(s.health == "-" for s in again.summaries()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [s.health for s in again.summaries()] == ["healthy"] * 3
