"""A run read as envelopes (``EnvelopeRun``): a live tail gives the levels of a one-shot read, which are those of
all the rows; older runs open too; the run view keeps every spike and reads rows only for a narrow window."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tests.app_helpers import DEMO_RUNS
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store import envelope_run
from tuidiag.store.envelope import Pyramid, from_rows
from tuidiag.store.envelope_run import EnvelopeRun
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.viewmodel.envelope_view import envelope_detail_data, level_between
from tuidiag.viewmodel.model import RunsModel

FIELDS = ("bucket", "count", "bad", "lo", "hi", "lo_pos", "first_step", "first_bad", "last_step", "last_value")
rows = st.lists(st.tuples(st.integers(0, 5000), st.sampled_from(["a", "b", "c"]), st.one_of(st.floats(-9, 9), st.just(np.nan))),
                min_size=1, max_size=30)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same_levels(run: EnvelopeRun, reference: tuidiag.Run) -> None:
    assert run.metric_names == reference.metric_names
    for name in reference.metric_names:
        series = reference.series(name)
        whole = Pyramid.of(from_rows(series.steps, series.values, min(run.pyramid(name).levels)))
        assert sorted(run.pyramid(name).levels) == sorted(whole.levels)
        for shift, level in whole.levels.items():
            mine = run.pyramid(name).levels[shift]
            for field in FIELDS:
                assert np.array_equal(getattr(mine, field), getattr(level, field), equal_nan=True), (name, shift, field)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flushes=st.lists(rows, min_size=1, max_size=12), max_buckets=st.sampled_from([4, 16_384]))
def test_a_live_tail_gives_the_levels_of_a_one_shot_read(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                                                         flushes: list[list[tuple[int, str, float]]], max_buckets: int) -> None:
    """Tailed flush by flush while the writer compacts (summaries appear, shards vanish), or opened once at the
    end from summaries and rows: the same levels, those of all the rows; a run too long for the bucket limit
    keeps coarser levels only."""
    monkeypatch.setattr(envelope_run, "MAX_BUCKETS", max_buckets)
    run_dir = tmp_path_factory.mktemp("env") / "run"
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=3)
    layouts = {name: Layout([name]) for name in "abc"}
    live = None
    for batch in flushes:
        for step, name, value in batch:
            writer.submit(MetricBatch(step, 0.0, layouts[name], np.array([value])))
        writer.flush()
        if live is None:
            live = EnvelopeRun(run_dir)
        else:
            live.refresh()
    writer.close()
    live.refresh()
    reference = tuidiag.open_run(run_dir)
    once = EnvelopeRun(run_dir)
    assert once.rows_read == live.rows_read == reference.rows_read
    _same_levels(live, reference)
    _same_levels(once, reference)
    assert all(len(p.levels[min(p.levels)]) <= max(max_buckets, 1) or len(p.levels) == 1 for p in once._pyramids.values())


def test_an_older_run_opens_and_leaves_its_levels_in_the_cache(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "old"
    shutil.copytree(DEMO_RUNS / "lr-too-high", run_dir)  # format 1 without summaries
    monkeypatch.setattr(envelope_run, "CACHE_MIN_ROWS", 0)
    first = EnvelopeRun(run_dir)
    assert first.summaries_read == 0 and list(cache.rglob("*.parquet.*"))
    again = EnvelopeRun(run_dir)
    assert again.summaries_read == len(list((run_dir / "metrics").iterdir())) and again.rows_read == first.rows_read
    _same_levels(again, tuidiag.open_run(run_dir))
    assert not (run_dir / "summaries").exists()  # the run directory is never written


def _long_run(run_dir: Path, steps: int, spike: int) -> None:
    """A finished run as the recorder leaves one: compacted shards with summaries, run.json with its summary."""
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=4)
    layout = Layout(["train/loss", "grad_norm/total"])
    per_flush = 2_000
    for start in range(0, steps, per_flush):
        for step in range(start, min(steps, start + per_flush), 20):
            loss = 9.0 if step == spike else 1.0 / (1 + step / 1000)
            writer.submit(MetricBatch(step, 1.7e9 + step, layout, np.array([loss, 1.0])))
        writer.flush()
    writer.close()
    manifest = new_manifest("long", {}, 1, 1.0)
    manifest.update(status="finished", last_step=writer.last_step, summary=writer.tail.to_json())
    write_manifest(run_dir, manifest)


def test_the_run_view_keeps_every_spike_and_reads_rows_only_for_a_narrow_window(tmp_path: Path) -> None:
    _long_run(tmp_path / "long", 400_000, spike=123_460)
    model = RunsModel(tmp_path)
    model.discover()
    model.refresh()
    detail = model.detail(str(tmp_path / "long"), points=200)
    (train,) = detail.charts["loss"].lines
    assert train[2].max() == 9.0 and len(train[1]) <= 250
    envelopes = model._slots[tmp_path / "long"].envelopes
    assert envelopes.summaries_read > 0 and envelopes._window is None  # the whole run: from envelopes alone
    zoomed = model.detail(str(tmp_path / "long"), points=200, window=(123_400, 123_500))
    x, y = zoomed.charts["loss"].lines[0][1:]
    assert envelopes._window is not None and y.max() == 9.0 and x.min() >= 123_400 and x.max() <= 123_500
    assert set(x.tolist()) == set(range(123_400, 123_501, 20))  # finer than any level kept: the rows themselves
    level = level_between(envelopes, "train/loss", 100, (0, 399_999))
    assert level is not None and len(level) <= 100 and np.nanmax(level.hi) == 9.0
    start = time.perf_counter()
    envelope_detail_data(envelopes, 200, (100_000, 200_000))
    assert time.perf_counter() - start < 5  # generous: a shared machine; the benchmark measures it
