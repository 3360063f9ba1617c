"""Fuzzing the reader (and the diagnosis on what it reads) with hypothesis.

Three kinds of input, each written as a shard beside a valid one: random bytes,
a valid shard with bytes flipped, cut or inserted, and well-formed tables holding
arbitrary values (any int64 step or seq, NaN/inf values and wall times, any
Unicode metric name). The reader must never raise (bad files become warnings),
never hang (each open runs in a thread with a time limit), and keep the valid rows.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tuidiag
from tuidiag.diagnosis import diagnose
from tuidiag.format import METRICS_SCHEMA, ShardName
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter

HANG_LIMIT_SECONDS = 20.0
FUZZ_EXAMPLES = int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", "60"))
"""Examples per fuzz test; set TUIDIAG_FUZZ_EXAMPLES=1000 for a longer campaign."""
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _template() -> tuple[Path, bytes]:
    """A run with two valid flushes, and the bytes of one valid shard to mutate."""
    base = Path(tempfile.mkdtemp(prefix="tuidiag-fuzz-"))
    writer = ShardWriter(base / "run", rank=0, flush_interval=3600, compact_min_files=1000)
    layout = Layout(["train/loss", "lr/group0"])
    for step in range(2):
        writer.submit(MetricBatch(step, float(step), layout, np.array([1.0, 0.1])))
        writer.flush()
    writer.close()
    shard = sorted((base / "run" / "metrics").glob("r0-*.parquet"))[0]
    return base / "run", shard.read_bytes()


TEMPLATE_RUN, VALID_SHARD = _template()
FUZZ_SHARD = ShardName(0, 50, 50).filename


def _bounded(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a thread; fail if it hangs or raises."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # reported below
            result["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_LIMIT_SECONDS)
    assert not worker.is_alive(), "the reader hung"
    if "error" in result:
        raise result["error"]
    return result["value"]


def _open_with(shard_bytes: bytes) -> tuidiag.Run:
    """Copy the template run, add ``shard_bytes`` as one more shard, open it and diagnose it."""
    work = Path(tempfile.mkdtemp(prefix="tuidiag-fuzz-case-"))
    try:
        run_dir = work / "run"
        shutil.copytree(TEMPLATE_RUN, run_dir)
        (run_dir / "metrics" / FUZZ_SHARD).write_bytes(shard_bytes)

        def read() -> tuidiag.Run:
            run = tuidiag.open_run(run_dir)
            run.refresh()
            diagnose(run)
            run.to_pandas()
            return run

        return _bounded(read)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _valid_rows_kept(run: tuidiag.Run) -> None:
    steps = run.series("train/loss").steps
    assert {0, 1} <= set(steps.tolist()) or any(FUZZ_SHARD in w for w in run.warnings)


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_are_skipped_with_a_warning(data: bytes) -> None:
    run = _open_with(data)
    assert any(FUZZ_SHARD in w for w in run.warnings)
    assert run.series("train/loss").steps.tolist() == [0, 1]


@FUZZ
@example(flips=[(723, 128)], cut=None, insert=None)  # found by this test: invalid UTF-8 in the footer
@given(
    flips=st.lists(st.tuples(st.integers(0, len(VALID_SHARD) - 1), st.integers(0, 255)), max_size=8),
    cut=st.one_of(st.none(), st.integers(0, len(VALID_SHARD))),
    insert=st.one_of(st.none(), st.tuples(st.integers(0, len(VALID_SHARD)), st.binary(min_size=1, max_size=64))),
)
def test_mutated_valid_shards_never_raise(
    flips: list[tuple[int, int]], cut: int | None, insert: tuple[int, bytes] | None
) -> None:
    data = bytearray(VALID_SHARD)
    for position, value in flips:
        data[position] = value
    if insert is not None:
        data[insert[0] : insert[0]] = insert[1]
    if cut is not None:
        data = data[:cut]
    run = _open_with(bytes(data))
    _valid_rows_kept(run)


_int64 = st.integers(-(2**63), 2**63 - 1)
_floats = st.floats(allow_nan=True, allow_infinity=True)


@FUZZ
@given(st.lists(st.tuples(_int64, _floats, st.text(max_size=30), _floats, _int64), min_size=1, max_size=40))
def test_well_formed_shards_with_arbitrary_values(rows: list[tuple[int, float, str, float, int]]) -> None:
    steps, walls, names, values, seqs = (list(column) for column in zip(*rows, strict=True))
    table = pa.table(
        {
            "step": pa.array(steps, pa.int64()),
            "wall_time": pa.array(walls, pa.float64()),
            "metric": pa.array(names, pa.string()).dictionary_encode(),
            "value": pa.array(values, pa.float64()),
            "rank": pa.array([0] * len(rows), pa.int32()),
            "seq": pa.array(seqs, pa.int64()),
        }
    ).cast(METRICS_SCHEMA)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    run = _open_with(sink.getvalue())
    assert run.warnings == [] or all("run.json" in w for w in run.warnings)
    assert run.rows_read >= 2
