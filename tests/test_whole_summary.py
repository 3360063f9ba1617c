"""The whole-run file: a run opened from it is the run read shard by shard, and any doubt reads the shards.

A long run's view was opened from a summary and a footer per shard (a 1M-step run: 20 of each, then their
levels merged and the coarser ones built); ``summaries/whole-r<rank>.parquet`` holds the result, written
by the recorder at close and by ``tuidiag compact``. These tests write runs of several shards the way
compaction leaves them (a shard with its summary, or a fresh one without), over steps, metrics first
logged mid-run, non-finite values, a step written in two flushes and runs long enough that only coarser
levels are kept; then compare every level of every metric, the rows counted and the wall marks with a
reading of the same run without the file. The file is ignored, and the result still the same, when a
shard it names was compacted, rewritten or removed, when an older shard appeared, or when the file is
damaged or not one.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tests.conftest import examples
from tuidiag.cli.main import main
from tuidiag.format import METRICS_DIR, METRICS_SCHEMA, SUMMARIES_DIR, ShardName  # type: ignore[attr-defined]
from tuidiag.store.discovery import list_shards
from tuidiag.store.envelope import _ARRAYS
from tuidiag.store.envelope_run import EnvelopeRun, open_envelopes
from tuidiag.store.whole_writer import write_whole
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.store.shards import compact, write_table_atomic
from tuidiag.store.summary_files import summary_table, write_summary
from tuidiag.store.whole_summary import COVERS_KEY, WALL_STEPS_KEY, whole_path

Rows = tuple[np.ndarray, np.ndarray, list[str], np.ndarray]


def _table(steps: np.ndarray, walls: np.ndarray, names: list[str], values: np.ndarray, seq: np.ndarray) -> pa.Table:
    dictionary = sorted(set(names))
    codes = np.array([dictionary.index(n) for n in names], np.int32)
    return pa.Table.from_arrays([pa.array(steps, pa.int64()), pa.array(walls, pa.float64()),
                                 pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(dictionary)),
                                 pa.array(values, pa.float64()), pa.array(np.zeros(len(steps), np.int32)),
                                 pa.array(seq, pa.int64())], schema=METRICS_SCHEMA)


def write_shards(run_dir: Path, flushes: list[Rows], cuts: list[int], summarised: list[bool], last_step: int,
                 first_seq: int = 0) -> None:
    """A finished run whose flushes (one seq each, from ``first_seq``) were compacted into shards at ``cuts`` (flush
    indices): each shard with its summary where ``summarised`` says so, as compaction leaves it, else as a fresh one."""
    (run_dir / METRICS_DIR).mkdir(parents=True)
    bounds = [0, *cuts, len(flushes)]
    for part, (a, b) in enumerate(zip(bounds, bounds[1:])):
        parts = flushes[a:b]
        seq = np.concatenate([np.full(len(p[0]), first_seq + a + i, np.int64) for i, p in enumerate(parts)])
        table = _table(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                       [n for p in parts for n in p[2]], np.concatenate([p[3] for p in parts]), seq)
        name = ShardName(0, first_seq + a, first_seq + b - 1)
        if summarised[part % len(summarised)]:
            write_summary(run_dir, name.filename, table)
        write_table_atomic(run_dir / METRICS_DIR / name.filename, table)
    manifest = new_manifest(run_dir.name, {}, 1, 1.0)
    manifest.update(status="finished", last_step=last_step)
    write_manifest(run_dir, manifest)


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[Rows], list[int], list[bool], int]:
    """Flushes of a run: steps of a stride (long runs keep coarser levels only), ``loss`` at each, ``extra`` from a
    step on, some non-finite values, the first step of a flush sometimes written again by the next."""
    n_flushes = draw(st.integers(2, 9))
    per_flush = draw(st.integers(1, 400))
    stride = draw(st.sampled_from([1, 7, 300, 2_500]))
    extra_from = draw(st.integers(0, n_flushes * per_flush))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    flushes: list[Rows] = []
    for f in range(n_flushes):
        steps = (np.arange(f * per_flush, (f + 1) * per_flush) * stride).astype(np.int64)
        if f and draw(st.booleans()):
            steps = np.concatenate(([flushes[-1][0][-1]], steps))  # a step whose rows span two flushes
        names = ["loss"] * len(steps) + ["extra"] * int(np.sum(steps >= extra_from * stride))
        all_steps = np.concatenate([steps, steps[steps >= extra_from * stride]])
        values = rng.normal(size=len(all_steps))
        values[rng.random(len(values)) < 0.03] = rng.choice([np.nan, np.inf, -np.inf])
        flushes.append((all_steps, 1.7e9 + all_steps * 0.01 + f, names, values))
    cuts = sorted(draw(st.sets(st.integers(1, n_flushes - 1), min_size=1, max_size=n_flushes - 1)))
    summarised = draw(st.lists(st.booleans(), min_size=1, max_size=4))
    return flushes, cuts, summarised, int(max(f[0].max() for f in flushes))


def assert_same(a: EnvelopeRun, b: EnvelopeRun) -> None:
    """Every level of every metric, the rows counted and the wall marks of ``a`` are those of ``b``."""
    assert a._pyramids.keys() == b._pyramids.keys()
    for key, pyramid in a._pyramids.items():
        other = b._pyramids[key]
        assert pyramid.levels.keys() == other.levels.keys(), key
        for shift, level in pyramid.levels.items():
            for field in _ARRAYS:
                assert np.array_equal(getattr(level, field), getattr(other.levels[shift], field), equal_nan=True), (key, shift, field)
    assert a.rows_read == b.rows_read and a.last_step == b.last_step
    for mine, theirs in zip(a.wall_marks(), b.wall_marks()):
        assert np.array_equal(mine, theirs)


def _without_whole(run_dir: Path, where: Path) -> EnvelopeRun:
    shutil.copytree(run_dir, where)
    whole_path(where, 0).unlink(missing_ok=True)
    return open_envelopes(where)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=runs())
def test_a_run_opened_from_its_whole_file_is_the_run_read_shard_by_shard(tmp_path_factory: pytest.TempPathFactory,
                                                                         run: tuple) -> None:
    flushes, cuts, summarised, last_step = run
    root = tmp_path_factory.mktemp("whole")
    write_shards(root / "run", flushes, cuts, summarised, last_step)
    assert write_whole(root / "run", 0)
    assert not write_whole(root / "run", 0)  # it already stands for every shard
    import pyarrow.parquet as pq

    assert pq.ParquetFile(whole_path(root / "run", 0)).metadata.num_row_groups == 1  # read as views, not joined copies
    opened = open_envelopes(root / "run")
    assert opened.whole_shards == len(cuts) + 1  # every shard from the one file
    assert_same(opened, _without_whole(root / "run", root / "plain"))


def _run(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    flushes = [(np.arange(i * 500, (i + 1) * 500), 1.7e9 + np.arange(i * 500, (i + 1) * 500), ["loss"] * 500, rng.normal(size=500))
               for i in range(6)]
    write_shards(tmp_path / "run", flushes, [2, 4], [True], 2_999, first_seq=10)  # seqs 10-15: room for an older shard
    assert write_whole(tmp_path / "run", 0)
    return tmp_path / "run"


def _flush(first_seq: int, steps: np.ndarray) -> pa.Table:
    return _table(steps, 1.7e9 + steps, ["loss"] * len(steps), np.cos(steps.astype(float)), np.full(len(steps), first_seq))


@pytest.mark.parametrize("change", ["a later flush", "a later compacted pair", "two named shards compacted",
                                    "a named shard rewritten", "a named shard gone", "an older shard"])
def test_the_file_stands_for_its_shards_only_while_they_are_there_as_they_were(tmp_path: Path, change: str) -> None:
    """A shard written after the file is read after it (the file still used); a shard the file names that
    was compacted, rewritten or removed, or a shard older than its newest, makes the reader read the shards."""
    run_dir = _run(tmp_path)
    metrics = run_dir / METRICS_DIR
    shards = list_shards(metrics)
    if change == "a later flush":
        write_table_atomic(metrics / ShardName(0, 16, 16).filename, _flush(16, np.arange(3_000, 3_100)))
    elif change == "a later compacted pair":
        for seq in (16, 17):
            steps = np.arange(3_000 + 100 * (seq - 16), 3_100 + 100 * (seq - 16))
            write_table_atomic(metrics / ShardName(0, seq, seq).filename, _flush(seq, steps))
        compact(metrics, list_shards(metrics)[-2:], METRICS_SCHEMA, root=run_dir)
    elif change == "two named shards compacted":
        compact(metrics, shards[:2], METRICS_SCHEMA, root=run_dir)
    elif change == "a named shard rewritten":
        write_table_atomic(shards[1][1], _flush(12, np.arange(1_000, 1_500)))
    elif change == "a named shard gone":
        shards[2][1].unlink()
    else:  # written before every shard the file names (a lower seq), found only now
        write_table_atomic(metrics / ShardName(0, 0, 0).filename, _flush(0, np.arange(0, 10)))
    opened = open_envelopes(run_dir)
    used = change in ("a later flush", "a later compacted pair")
    assert (opened.whole_shards == 3) if used else (opened.whole_shards == 0)
    assert_same(opened, _without_whole(run_dir, tmp_path / "plain"))


def _forge(path: Path, how: str, run_dir: Path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    if how == "garbage":
        path.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "a shard's summary":
        shutil.copy(run_dir / SUMMARIES_DIR / list_shards(run_dir / METRICS_DIR)[0][1].name, path)
    else:
        if how == "covers not a list":
            meta[COVERS_KEY] = b'{"a": 1}'
        elif how == "covers a missing shard":
            meta[COVERS_KEY] = json.dumps([*json.loads(meta[COVERS_KEY]), ["r0-000000099-000000099.parquet", 10]]).encode()
        elif how == "a wrong size":
            meta[COVERS_KEY] = json.dumps([[name, size + 1] for name, size in json.loads(meta[COVERS_KEY])]).encode()
        elif how == "marks that do not pair":
            meta[WALL_STEPS_KEY] = base64.b64encode(np.zeros(3).tobytes())
        elif how == "marks not base64":
            meta[WALL_STEPS_KEY] = b"%%%"
        elif how == "a newer version":
            meta[b"tuidiag.summary_version"] = b"2"
        pq.write_table(table.replace_schema_metadata(meta), path)


@pytest.mark.parametrize("how", ["garbage", "empty", "a shard's summary", "covers not a list", "covers a missing shard",
                                 "a wrong size", "marks that do not pair", "marks not base64", "a newer version"])
def test_a_damaged_or_foreign_whole_file_is_ignored(tmp_path: Path, how: str) -> None:
    run_dir = _run(tmp_path)
    _forge(whole_path(run_dir, 0), how, run_dir)
    opened = open_envelopes(run_dir)
    assert opened.whole_shards == 0
    assert_same(opened, _without_whole(run_dir, tmp_path / "plain"))


def test_the_recorder_writes_it_at_close_and_compact_for_older_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real recording whose shards compaction leaves apart (each too large to merge: random values of 160
    metrics) closes with the whole-run file, and the run opens from it as it reads without it. The same run as
    an older writer left it (no summaries, no file): ``tuidiag compact`` writes both, a second time nothing."""
    run_dir = tmp_path / "run"
    rng = np.random.default_rng(0)
    names = [f"m{i:03d}" for i in range(160)]
    with tuidiag.Recorder(run_dir, flush_interval=3600) as rec:
        for step in range(3_300):
            rec.log(dict(zip(names, rng.normal(size=len(names)).tolist())), step=step)
            if step % 100 == 99:
                rec.flush()
    shards = len(list_shards(run_dir / METRICS_DIR))
    assert shards >= 2
    opened = open_envelopes(run_dir)
    assert opened.whole_shards == shards
    assert_same(opened, _without_whole(run_dir, tmp_path / "plain"))
    shutil.rmtree(run_dir / SUMMARIES_DIR)
    assert main(["compact", str(run_dir)]) == 0 and main(["compact", str(run_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2].endswith(f"wrote {shards} summaries and the whole-run file") and out[-1].endswith("wrote 0 summaries")
    assert open_envelopes(run_dir).whole_shards == shards


def test_no_file_is_written_from_many_rows_without_summaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards without a summary beyond the bound are not decoded to write the file (a training's close never waits
    on them); with their summaries written, it is."""
    from tuidiag.store import whole_writer
    from tuidiag.store.summary_files import build_missing

    run_dir = _run(tmp_path)
    whole_path(run_dir, 0).unlink()
    shutil.rmtree(run_dir / SUMMARIES_DIR)
    sizes = sum(path.stat().st_size for _, path in list_shards(run_dir / METRICS_DIR))
    monkeypatch.setattr(whole_writer, "WHOLE_MAX_ROW_BYTES", sizes - 1)
    assert not write_whole(run_dir, 0) and not whole_path(run_dir, 0).exists()
    assert build_missing(run_dir) == 3 and write_whole(run_dir, 0)


@settings(max_examples=examples(240), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bit=st.integers(0, 2**40))
def test_a_flipped_bit_anywhere_in_the_file_is_noticed_or_harmless(tmp_path_factory: pytest.TempPathFactory, bit: int) -> None:
    """One bit of the file flipped (bit rot, a bad copy): the pages' CRCs, the CRC of the footer's shard list and
    wall marks, and the checks of the summaries' reader make the reader read the shards, or the flip was in a
    part nothing reads; what is drawn is the same either way."""
    root = tmp_path_factory.mktemp("flip")
    run_dir = _run(root)
    where = whole_path(run_dir, 0)
    data = bytearray(where.read_bytes())
    position = bit % (len(data) * 8)
    data[position // 8] ^= 1 << (position % 8)
    where.write_bytes(bytes(data))
    assert_same(open_envelopes(run_dir), _without_whole(run_dir, root / "plain"))


def test_a_resumed_run_gets_no_file(tmp_path: Path) -> None:
    """A later session continued the run (its view reads rows): no file, decided before any shard is read."""
    run_dir = _run(tmp_path)
    whole_path(run_dir, 0).unlink()
    with tuidiag.Recorder(run_dir, resume="allow") as rec:
        rec.step(1.0)
    assert tuidiag.open_run(run_dir).resume_steps
    assert not write_whole(run_dir, 0) and not whole_path(run_dir, 0).exists()


def test_writing_the_file_leaves_the_monitors_cache_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The training's close decodes a large shard without a summary: the levels are not kept in the cache (the
    monitor keeps them there when it reads such a shard, not the training)."""
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    run_dir = _run(tmp_path)
    whole_path(run_dir, 0).unlink()
    steps = np.arange(3_000, 103_000)
    write_table_atomic(run_dir / METRICS_DIR / ShardName(0, 16, 16).filename, _flush(16, steps))
    assert write_whole(run_dir, 0)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.*-*"))
    open_envelopes(run_dir)  # the monitor's reading: the new shard is read from the file now
    assert open_envelopes(run_dir).whole_shards == 4


def test_the_whole_table_is_a_summaries_table() -> None:
    """The file is read by the summaries' own reader: same schema, version and row order."""
    from tuidiag.store.envelope import Pyramid, from_rows
    from tuidiag.store.whole_summary import whole_table

    pyramids = {"loss": Pyramid.of(from_rows(np.arange(5_000), np.sin(np.arange(5_000.0))))}
    table = whole_table(pyramids, {"r0-000000000-000000001.parquet": 10}, (np.array([0.0, 9.0]), np.array([1.0, 2.0])))
    plain = summary_table(pyramids, 5_000)
    assert table.schema.remove_metadata() == plain.schema.remove_metadata() and table.num_rows == plain.num_rows
