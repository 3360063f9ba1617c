"""Every size a file claims is checked before tuidiag acts on it (``tuidiag/store/limits.py``).

The red-team cases are regressions: a footer claiming 10^12 rows, a shard name spanning
10^12 flushes, a 524 MB ``run.json``, a 5,000-level config, a 1 GB control request.
The classes are generated with hypothesis: any footer count forged to any int64, any
shard name, any JSON shape and nesting, any TFRecord length. Allocation is watched two
ways: under ``RLIMIT_AS`` (address space capped a few GiB above what the process
uses, so memory reserved from a forged number fails loudly instead of passing
unnoticed) and with ``tracemalloc`` (a file over its limit is never read into memory).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
import tuidiag
from tests.cli_driver import results
from tests.parquet_forge import COLUMN_NUM_VALUES, FILE_NUM_ROWS, ROW_GROUP_NUM_ROWS, forge, int_fields
from tuidiag.format import METRICS_SCHEMA, ShardName
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store import limits
from tuidiag.store.limits import LimitError, json_depth, read_json_bounded
from tuidiag.store.read_plan import rows_in
from tuidiag.store.shards import list_shards
from tuidiag.store.sql_views import select_shards
from tuidiag.store.tail import latest

ROOT = Path(__file__).resolve().parent.parent
GiB = 1 << 30
COLUMN_UNCOMPRESSED = (4, 1, 3, 6)
"""ColumnMetaData.total_uncompressed_size."""
FAST = settings(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@contextmanager
def address_space(extra: int = 2 * GiB) -> Iterator[None]:
    """Cap this process's address space at what it uses now plus ``extra`` (restored after)."""
    used = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (used + extra, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def traced_peak() -> Iterator[list[int]]:
    """The peak of Python-visible allocations (numpy's included) while the block runs, in bytes."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def _nested(depth: int, kinds: list[bool]) -> str:
    """JSON nesting ``depth`` containers, arrays or objects as ``kinds`` cycles."""
    opens = "".join('{"k": ' if kinds[i % len(kinds)] else "[" for i in range(depth))
    closes = "".join("}" if kinds[i % len(kinds)] else "]" for i in reversed(range(depth)))
    return opens + "1" + closes


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


TRICKY = st.text(alphabet='[]{}"\\:,ab \n\u00e9\U0001f642', max_size=12)
"""Text full of what a bracket scan could mistake for structure."""
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TRICKY,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY, inner, max_size=4), max_leaves=30)


@settings(FAST, max_examples=examples(150))
@given(value=JSON)
def test_json_depth_is_the_nesting_whatever_the_strings_hold(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=bool(len(str(value)) % 2))
    assert json_depth(text) == _depth(value)


@settings(FAST, max_examples=examples(200))
@given(text=st.text(alphabet='[]{}"\\x', max_size=200))
def test_json_depth_takes_any_text(text: str) -> None:
    assert json_depth(text) >= 0  # malformed text gets some number, never an error


@settings(FAST, max_examples=examples(40))
@given(depth=st.integers(1, 6000), kinds=st.lists(st.booleans(), min_size=1, max_size=5))
def test_json_nesting_over_the_limit_is_refused_before_parsing(depth: int, kinds: list[bool]) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        handle.write(_nested(depth, kinds))
    try:
        if depth <= limits.MAX_JSON_DEPTH:
            assert _depth(read_json_bounded(handle.name, 1 << 20)) == depth
        else:
            with pytest.raises(LimitError, match="nests more than 64"):
                read_json_bounded(handle.name, 1 << 20)
    finally:
        os.unlink(handle.name)


def test_a_json_file_over_its_size_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text("[" + " " * (2 << 20) + "]")
    with traced_peak() as peak, pytest.raises(LimitError, match=r"big.json is 2,097,154 bytes, over the limit of 1,048,576"):
        read_json_bounded(path, 1 << 20)
    assert peak[0] < 256 << 10
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(LimitError, match="not a regular file"):  # refused at once, not waited on
        read_json_bounded(tmp_path / "fifo.json", 1 << 20)


def _run(run_dir: Path, config: dict[str, Any] | None = None) -> Path:
    with tuidiag.Recorder(run_dir, flush_interval=3600, config=config or {"lr": 0.1}) as rec:
        for step in range(40):
            rec.log({"train/loss": 1.0 / (step + 1)}, step=step)
            if step % 10 == 9:
                rec.flush()
    return run_dir


def test_a_manifest_over_its_limits_is_skipped_by_name_and_never_read(tmp_path: Path) -> None:
    big, deep = _run(tmp_path / "big"), _run(tmp_path / "deep")
    with open(big / "run.json", "r+b") as handle:  # 524 MB, sparse: costs nothing unless read
        handle.truncate(524 * (1 << 20))
    (deep / "run.json").write_text('{"name": "deep", "config": ' + _nested(5000, [True, False]) + "}")
    with traced_peak() as peak:
        for run_dir, reason in ((big, "549,453,824 bytes, over the limit"), (deep, "nests more than 64")):
            run = tuidiag.open_run(run_dir)
            assert len(run.series("train/loss")) == 40 and run.status == "unknown"
            assert any("run.json" in w and reason in w for w in run.warnings), run.warnings
    assert peak[0] < 8 << 20


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A run of one shard (three flushes merged) and that shard's bytes."""
    run_dir = tmp_path_factory.mktemp("template") / "run"
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, compact_min_files=1000)
    layout = Layout(["train/loss", "lr/group0"])
    for step in range(30):
        writer.submit(MetricBatch(step, float(step), layout, np.array([1.0 / (step + 1), 0.1])))
        if step % 10 == 9:
            writer.flush()
    writer.close()
    shard = sorted((run_dir / "metrics").glob("r0-*.parquet"))[0]
    return run_dir, shard.read_bytes()


def _with_shard(template: tuple[Path, bytes], name: str, data: bytes) -> Path:
    work = Path(tempfile.mkdtemp(prefix="tuidiag-bounds-")) / "run"
    shutil.copytree(template[0], work)
    (work / "metrics" / name).write_bytes(data)
    return work


ROWS = 60
"""Rows in the template's one shard (30 steps x 2 metrics; closing the writer merged its three flushes)."""
FORGEABLE = [FILE_NUM_ROWS, ROW_GROUP_NUM_ROWS, COLUMN_NUM_VALUES, COLUMN_UNCOMPRESSED]
HUGE = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([10**12, 2**62, -1, 2**31, 10**9]), st.integers(0, 10**6))


@settings(FAST, max_examples=examples(40))
@given(field=st.sampled_from(FORGEABLE), which=st.integers(0, 5), value=HUGE)
def test_a_forged_footer_count_is_never_allocated(template: tuple[Path, bytes], field: tuple[int, ...], which: int,
                                                  value: int) -> None:
    """Any count in a shard's footer forged to any int64: the reader, its row estimate and the query's
    shard choice stay within a 2 GiB address-space margin, keep every valid row, and name the shard."""
    run_dir, data = template
    fields = [f for f in int_fields(data) if f.path == field]
    forged = forge(data, field, value, which % len(fields))
    work = _with_shard(template, ShardName(0, 50, 50).filename, forged)
    try:
        size = len(forged)
        with address_space():
            run = tuidiag.open_run(work)
            newest = latest(work, "train/loss")  # what tuidiag status reads
            estimate = rows_in(list_shards(work / "metrics"))
            warnings: list[str] = []
            scans = select_shards(work / "metrics", METRICS_SCHEMA, warnings)
        assert set(range(30)) <= set(run.series("train/loss").steps.tolist())  # every valid row kept
        assert newest is not None and newest.step == 29
        assert estimate <= ROWS + size * limits.MAX_RESERVE_ROWS_PER_BYTE
        if field in (FILE_NUM_ROWS, ROW_GROUP_NUM_ROWS):
            impossible = value != ROWS  # the file's count and its row groups' sum disagree
        elif field == COLUMN_NUM_VALUES:
            impossible = value < 0 or value > size * limits.MAX_ROWS_PER_BYTE
        else:
            impossible = value > size * limits.MAX_UNCOMPRESSED_PER_BYTE
        if impossible:
            assert any("r0-000000050-000000050" in w and "footer claims" in w for w in run.warnings), run.warnings
            assert any("r0-000000050-000000050" in w for w in warnings) and sum(len(s.files) for s in scans) == 1
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


@settings(FAST, max_examples=examples(40))
@given(rank=st.integers(0, 10**12), first=st.integers(0, 10**25), width=st.integers(0, 10**25))
def test_a_shard_name_claims_nothing_that_is_allocated(template: tuple[Path, bytes], rank: int, first: int, width: int) -> None:
    """Any rank and flush range in a shard's name: parsed only within the columns' types, and neither the
    reader nor the query allocates per flush of the range (the query computes what to drop from intervals)."""
    run_dir, data = template
    name = f"r{rank}-{first:09d}-{first + width:09d}.parquet"
    parsed = ShardName.parse(name)
    assert (parsed is not None) == (rank < 2**31 and first + width < 2**63 and len(str(first + width)) <= 19)
    work = _with_shard(template, name, data)
    try:
        with address_space():
            run = tuidiag.open_run(work)
            warnings: list[str] = []
            scans = select_shards(work / "metrics", METRICS_SCHEMA, warnings)
        assert set(range(30)) <= set(run.series("train/loss").steps.tolist()) and not warnings
        assert 1 <= sum(len(s.files) for s in scans) <= 1 + (parsed is not None)
        for scan in scans:  # flushes to drop: whole intervals inside the shard's own range
            assert all(parsed and parsed.first <= a <= b <= parsed.last for a, b in scan.excluded)
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


def test_a_reservation_the_memory_cannot_hold_falls_back_to_growing() -> None:
    from tuidiag.store.series_buffer import _Column

    column = _Column(np.int64)
    with address_space():
        column.extend([np.arange(5)], reserve=2**60)
    assert column.data[: column.n].tolist() == [0, 1, 2, 3, 4] and len(column.data) < 2**20


def test_the_red_team_files_in_the_cli_under_a_4_gib_address_space(tmp_path: Path, template: tuple[Path, bytes]) -> None:
    """ls, status, diagnose and query as the console script, capped at 4 GiB of address space, on the red
    team's files: each command exits 0 and names what it skipped."""
    root = tmp_path / "root"
    forged = _with_shard(template, ShardName(0, 50, 50).filename, forge(template[1], FILE_NUM_ROWS, 10**12))
    shutil.move(forged, root / "forged")
    wide = _with_shard(template, "r0-000000002-999999999999.parquet", template[1])
    shutil.move(wide, root / "wide")
    big = _run(root / "big")
    with open(big / "run.json", "r+b") as handle:
        handle.truncate(524 * (1 << 20))
    deep = _run(root / "deep")
    (deep / "run.json").write_text('{"config": ' + _nested(5000, [True]) + "}")
    history = tmp_path / "history.json"
    history.write_text('{"loss": [1, 0.5], "x": ' + _nested(5000, [False]) + "}")
    commands = [["ls", str(root)], ["diagnose", str(root / "forged")], ["status", "--ascii", str(root / "big")],
                ["status", "--ascii", str(root / "forged")], ["diagnose", "--json", str(root / "deep")],
                ["query", "--root", str(root), "select run, count(*) from metrics group by run order by run"],
                ["import", "keras-history", str(history), str(tmp_path / "imported")]]
    env = os.environ | {"PYTHONPATH": str(ROOT), "TUIDIAG_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "400"}
    done = subprocess.run([sys.executable, "-m", "tests.cli_driver", json.dumps(commands), str(4 * GiB)],
                          capture_output=True, timeout=240, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    outs = results(done.stdout, len(commands))
    errs = [err.decode() for _, err in results(done.stderr, len(commands))]
    codes = [rc for rc, _ in outs]
    assert codes == [0, 0, 2, 0, 0, 0, 2], errs
    ls_out = outs[0][1].decode()
    assert "footer claims 1,000,000,000,000 rows" in ls_out and "549,453,824 bytes" in ls_out
    assert "r0-000000050-000000050.parquet" in outs[1][1].decode() and "MemoryError" not in "".join(errs)
    assert "549,453,824 bytes, over the limit" in errs[2] and "nests more than 64" in errs[6]
    counts = dict(line.split() for line in outs[5][1].decode().splitlines()[1:] if line.strip())
    assert counts["forged"] == str(ROWS) and set(counts) == {"big", "deep", "forged", "wide"}


def test_a_control_request_over_its_limit_is_refused_unread(tmp_path: Path) -> None:
    from tuidiag.store import control_channel as ctl

    run_dir = tmp_path / "r"
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        request_id = ctl.write_request(run_dir, "lr_find", {"steps": 10})
        with open(ctl.control_dir(run_dir) / f"{request_id}{ctl.REQUEST_SUFFIX}", "r+b") as handle:
            handle.truncate(1 << 30)  # 1 GB, sparse
        tracemalloc.start()
        rec.flush()
        rec.step(1.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    status = ctl.read_status(run_dir, request_id)
    assert status["state"] == "refused" and "over the limit of 65,536" in status["message"]
    assert peak < 16 << 20  # the old reader read all 1 GB


def test_other_json_files_over_their_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job result, a status-cache entry and an event's data: over the limit, skipped or kept raw."""
    from tuidiag.cli import status_cache
    from tuidiag.store import job_results

    run_dir = _run(tmp_path / "r")
    first = job_results.save_result(run_dir, "lr_find", {"summary": "ok"})
    second = job_results.save_result(run_dir, "lr_find", {"summary": "newer"})
    with open(second, "r+b") as handle:
        handle.truncate(job_results.MAX_JOB_RESULT_BYTES + 1)
    assert job_results.latest_result(run_dir, "lr_find")["result"]["summary"] == "ok" and first != second
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    status_cache.refresh(run_dir)
    assert status_cache.load(run_dir) is not None
    with open(status_cache._entry(run_dir), "r+b") as handle:
        handle.truncate(limits.MAX_STATUS_CACHE_BYTES + 1)
    assert status_cache.load(run_dir) is None
    with tuidiag.Recorder(tmp_path / "e", flush_interval=3600) as rec:
        rec.step(1.0)
        rec.event("deep", "an event with deep data", data={"d": json.loads(_nested(100, [True]))})
    events = tuidiag.open_run(tmp_path / "e").events
    deep = [e for e in events if e.kind == "deep"]
    assert deep and deep[0].message == "an event with deep data"
    # bounded either way: the recorder caps data it writes (a placeholder), the reader keeps over-deep data raw
    assert "raw" in deep[0].data or "<nested deeper than" in json.dumps(deep[0].data)


def _record(masked_crc32c: Any, data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


@settings(FAST, max_examples=25)
@given(at=st.integers(0, 9), length=st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([2**63, 2**40, 10**9, 200])))
def test_a_forged_tfrecord_length_is_never_allocated(at: int, length: int) -> None:
    """A record whose length (with a valid CRC) claims any uint64: the events before it are kept, the
    rest of the file is reported, and nothing near that length is allocated."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from tuidiag.importers.tensorboard import read_scalars

    records = []
    for step in range(10):
        event = Event(step=step, wall_time=1.0)
        event.summary.value.add(tag="loss", simple_value=1.0 / (step + 1))
        records.append(_record(masked_crc32c, event.SerializeToString()))
    header = struct.pack("<Q", length)
    records[at] = header + struct.pack("<I", masked_crc32c(header)) + records[at][12:]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "events.out.tfevents.1"
        path.write_bytes(b"".join(records))
        notes: list[str] = []
        with address_space():
            scalars = read_scalars([path], notes)
    steps = scalars.get("loss", ([], [], []))[0]
    assert steps[:at] == list(range(at)) and len(steps) <= 10
    if len(steps) < 10:
        assert any("corrupt or truncated" in n or "does not parse" in n for n in notes), notes


def test_a_huge_tfrecord_is_stepped_over_and_the_rest_read(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from tuidiag.importers.tensorboard import read_scalars

    def scalar(step: int) -> bytes:
        event = Event(step=step, wall_time=1.0)
        event.summary.value.add(tag="loss", simple_value=float(step))
        return _record(masked_crc32c, event.SerializeToString())

    length = struct.pack("<Q", limits.MAX_TFRECORD_BYTES + 1)
    big = length + struct.pack("<I", masked_crc32c(length)) + b"\0" * (limits.MAX_TFRECORD_BYTES + 1) + b"\0" * 4
    path = tmp_path / "events.out.tfevents.1"
    path.write_bytes(scalar(0) + big + scalar(1))
    notes: list[str] = []
    with traced_peak() as peak:
        scalars = read_scalars([path], notes)
    assert scalars["loss"][0] == [0, 1] and peak[0] < 4 << 20
    assert any("skipped unread" in n for n in notes) and not any("corrupt" in n for n in notes)


def test_imported_files_over_their_limits(tmp_path: Path) -> None:
    """A CSV over its size; an hparams.yaml that loops, explodes through aliases or nests too deep."""
    from tuidiag.importers.csv_log import read_csv_log
    from tuidiag.importers.source import ImportSourceError

    csv_path = tmp_path / "big" / "metrics.csv"
    csv_path.parent.mkdir()
    with open(csv_path, "wb") as handle:
        handle.write(b"step,loss\n0,1\n")
        handle.truncate(limits.MAX_CSV_BYTES + 1)
    with pytest.raises(ImportSourceError, match="over the limit"):
        read_csv_log(csv_path)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    yamls = {"loop": "a: &a [*a]\n", "laughs": laughs, "deep": "a: " + "[" * 200 + "]" * 200 + "\n"}
    for name, text in yamls.items():
        directory = tmp_path / name
        directory.mkdir()
        (directory / "metrics.csv").write_text("step,epoch,loss\n0,0,1.0\n1,0,0.5\n")
        (directory / "hparams.yaml").write_text(text)
        source = read_csv_log(directory / "metrics.csv")
        assert source.config == {} and any("hparams.yaml not read" in n for n in source.notes), (name, source.notes)
        assert len(source.series) == 2


def test_status_reads_past_a_fifo_named_as_the_newest_shard(tmp_path: Path) -> None:
    """``status`` reads the newest shard first: a FIFO there blocked it forever (found while bounding its reads)."""
    import threading

    run_dir = _run(tmp_path / "r")
    os.mkfifo(run_dir / "metrics" / "r0-000000099-000000099.parquet")
    found: list[Any] = []
    reader = threading.Thread(target=lambda: found.append(latest(run_dir, "train/loss")), daemon=True)
    reader.start()
    reader.join(20)
    assert not reader.is_alive(), "latest() blocked on the FIFO"
    assert found[0] is not None and found[0].step == 39
