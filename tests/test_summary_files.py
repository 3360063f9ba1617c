"""Summaries on disk: written at compaction and by ``tuidiag compact``, exact, and ignored when they cannot be trusted."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tests.app_helpers import own_copy
from tuidiag.cli.main import main
from tuidiag.format import METRICS_DIR, SUMMARIES_DIR
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.format import METRICS_SCHEMA  # type: ignore[attr-defined]
from tuidiag.store.decode import ShardError, read_shard
from tuidiag.store.discovery import list_shards
from tuidiag.store.envelope import from_rows, merge
from tuidiag.store.summary_files import pyramids_of, read_levels, shard_rows, summary_path, write_summary

FIELDS = ("bucket", "count", "bad", "lo", "hi", "lo_pos", "first_step", "first_bad", "last_step", "last_value")
rows = st.lists(st.tuples(st.integers(0, 3000), st.sampled_from(["a", "b"]), st.one_of(st.floats(-5, 5), st.just(np.nan))),
                min_size=1, max_size=40)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flushes=st.lists(rows, min_size=1, max_size=10))
def test_summaries_of_compacted_shards_merge_into_the_levels_of_all_rows(tmp_path_factory: pytest.TempPathFactory,
                                                                         flushes: list[list[tuple[int, str, float]]]) -> None:
    """Whatever is written and compacted, the summaries (for shards that have one) and the rows (for the
    others), merged in write order, give each metric the levels of all its rows."""
    run_dir = tmp_path_factory.mktemp("sum") / "run"
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=3)
    layouts = {"a": Layout(["a"]), "b": Layout(["b"])}
    for batch in flushes:
        for step, name, value in batch:
            writer.submit(MetricBatch(step, 0.0, layouts[name], np.array([value])))
        writer.flush()
    writer.close()
    parts: dict[str, list] = {}
    for shard, path in list_shards(run_dir / METRICS_DIR):  # in seq order: write order
        try:
            levels = {name: by_shift[8] for name, by_shift in read_levels(summary_path(run_dir, path.name), shard_rows(path)).items()}
            assert shard.first < shard.last  # only merged shards have one
        except FileNotFoundError:
            table = read_shard(path, METRICS_SCHEMA)
            levels = {name: p.levels[8] for name, p in pyramids_of(table).items()}
        for name, level in levels.items():
            parts.setdefault(name, []).append(level)
    run = tuidiag.open_run(run_dir)
    assert sorted(parts) == run.metric_names
    for name, found in parts.items():
        series = run.series(name)
        whole, merged = from_rows(series.steps, series.values), merge(found)
        for field in FIELDS:
            assert np.array_equal(getattr(merged, field), getattr(whole, field), equal_nan=True), field


@pytest.mark.parametrize("forge", ["garbage", "metrics shard", "another shard's", "empty"])
def test_a_summary_that_cannot_be_trusted_is_refused(tmp_path: Path, forge: str) -> None:
    run_dir = tmp_path / "run"
    own_copy("healthy", run_dir)
    assert main(["compact", str(run_dir)]) == 0
    (shard,) = [p for _, p in list_shards(run_dir / METRICS_DIR)]
    target = summary_path(run_dir, shard.name)
    assert read_levels(target, shard_rows(shard))["train/loss"]
    if forge == "garbage":
        target.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    elif forge == "metrics shard":
        shutil.copy(shard, target)
    elif forge == "another shard's":
        shutil.copy(summary_path(run_dir, shard.name), tmp_path / "kept")
        write_summary(run_dir, shard.name, read_shard(shard, METRICS_SCHEMA).slice(0, 10))
    else:
        target.write_bytes(b"")
    with pytest.raises(ShardError):
        read_levels(target, shard_rows(shard))


def test_compact_writes_what_older_runs_lack_and_leaves_live_runs_unmerged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old"
    own_copy("lr-too-high", old)
    assert not (old / SUMMARIES_DIR).exists()
    assert main(["compact", str(old)]) == 0 and main(["compact", str(old)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("wrote 1 summaries") and out[1].endswith("wrote 0 summaries")
    writer = ShardWriter(tmp_path / "live", rank=0, flush_interval=3600)
    for step in range(3):
        writer.submit(MetricBatch(step, 0.0, Layout(["a"]), np.array([1.0])))
        writer.flush()
    manifest = {"status": "running", "heartbeat": 4e9, "name": "live"}
    (tmp_path / "live" / "run.json").write_text(__import__("json").dumps(manifest))
    assert main(["compact", str(tmp_path / "live")]) == 0
    assert capsys.readouterr().out.strip().endswith("wrote 3 summaries (live run: shards not merged)")
    assert len(list_shards(tmp_path / "live" / METRICS_DIR)) == 3
    writer.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table_rows=rows, forge=st.sampled_from(["none", "bucket order", "count", "bad", "shift"]), seed=st.integers(0, 2**16))
def test_a_summary_with_impossible_levels_is_refused(tmp_path_factory: pytest.TempPathFactory, table_rows: list, forge: str,
                                                     seed: int) -> None:
    """Every level of a summary is checked (buckets rising within a level, counts not negative, a metric and shift that
    exists): one forged row anywhere is refused; buckets that restart at the next level or metric are not forged."""
    import pyarrow as pa

    from tuidiag.store.envelope import Pyramid
    from tuidiag.store.shards import write_table_atomic
    from tuidiag.store.summary_files import summary_table

    steps = np.array([s for s, _, _ in table_rows], np.int64)
    names = np.array([n for _, n, _ in table_rows])
    values = np.array([v for _, _, v in table_rows], np.float64)
    pyramids = {n: Pyramid.of(from_rows(steps[names == n], values[names == n])) for n in sorted(set(names.tolist()))}
    table = summary_table(pyramids, len(table_rows))
    columns = {name: table.column(name).to_numpy().copy() for name in ("bucket", "count", "bad", "shift")}
    rng = np.random.default_rng(seed)
    row = int(rng.integers(table.num_rows))
    same_level = [i for i in range(1, table.num_rows) if (table.column("metric").to_pylist()[i], columns["shift"][i])
                  == (table.column("metric").to_pylist()[i - 1], columns["shift"][i - 1])]
    if forge == "bucket order":
        if not same_level:
            return  # every level holds one bucket: nothing to put out of order
        row = same_level[int(rng.integers(len(same_level)))]
        columns["bucket"][row] = columns["bucket"][row - 1]
    elif forge in ("count", "bad"):
        columns[forge][row] = -1
    elif forge == "shift":
        columns["shift"][row] = 63

    arrays = [pa.array(columns[f.name], f.type) if f.name in columns else table.column(f.name) for f in table.schema]
    path = tmp_path_factory.mktemp("forged") / "summary.parquet"
    write_table_atomic(path, pa.Table.from_arrays(arrays, schema=table.schema))
    if forge == "none":
        levels = read_levels(path, len(table_rows), min_shift=0)
        assert {name: sorted(p.levels) for name, p in pyramids.items()} == {name: sorted(lv) for name, lv in levels.items()}
    else:
        with pytest.raises(ShardError):
            read_levels(path, len(table_rows), min_shift=0)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table_rows=rows, min_shift=st.integers(0, 16))
def test_the_finest_level_alone_is_the_finest_of_all_levels_read(tmp_path_factory: pytest.TempPathFactory,
                                                                 table_rows: list, min_shift: int) -> None:
    """``finest_only`` (what the monitor reads when it opens a run) gives each metric exactly one level: the finest
    of those a full read gives at or above ``min_shift``, equal to it array for array; a metric with none is absent."""
    from tuidiag.store.envelope import Pyramid
    from tuidiag.store.shards import write_table_atomic
    from tuidiag.store.summary_files import summary_table

    steps = np.array([s for s, _, _ in table_rows], np.int64)
    names = np.array([n for _, n, _ in table_rows])
    values = np.array([v for _, _, v in table_rows], np.float64)
    pyramids = {n: Pyramid.of(from_rows(steps[names == n], values[names == n])) for n in sorted(set(names.tolist()))}
    path = tmp_path_factory.mktemp("finest") / "summary.parquet"
    write_table_atomic(path, summary_table(pyramids, len(table_rows)))
    every = read_levels(path, len(table_rows), min_shift=min_shift)
    finest = read_levels(path, len(table_rows), min_shift=min_shift, finest_only=True)
    assert set(finest) == set(every)
    for name, by_shift in finest.items():
        shift = min(every[name])
        assert list(by_shift) == [shift]
        for column in ("bucket", "count", "bad", "lo", "hi", "total", "first_step", "last_step", "last_value"):
            np.testing.assert_array_equal(getattr(by_shift[shift], column), getattr(every[name][shift], column))
