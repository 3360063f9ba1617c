"""Values given to the recorder: accepted, converted or refused at the call; none costs another row.

The property test drives the public API (``step``, ``log``, ``batch``, ``event``,
``flush``) with arbitrary values and checks exact row counts read back from the
shards against the documented rule (README "Logging values"), written out here
independently of the recorder's code.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import examples
import tuidiag
from tuidiag.cli.main import main
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.recorder.device import tensor_summary
from tuidiag.recorder.values import QUANTILE_SAMPLE, array_summary
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # hypothesis filling float16 arrays

SUMMARY = ["q0", "q5", "q25", "q50", "q75", "q95", "q100", "mean", "nonfinite"]
"""The documented rows of a multi-element tensor or array (README "Logging values")."""
LEVELS = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0]
EXAMPLES = int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", "50"))
"""Call sequences per run of the property test; TUIDIAG_FUZZ_EXAMPLES=1000 for a longer campaign."""


# ---- reading back --------------------------------------------------------------
def metric_rows(run_dir: Path) -> list[tuple[str, float]]:
    """(name, value) of every metric row in the run's shards (read with pyarrow, not the reader)."""
    files = sorted((run_dir / "metrics").glob("*.parquet"))
    rows = []
    for path in files:
        table = pq.read_table(path)
        rows += zip(table.column("metric").to_pylist(), table.column("value").to_pylist())
    return rows


def event_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every event row in the run's shards, as dicts."""
    return [row for path in sorted((run_dir / "events").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def counts(run_dir: Path) -> Counter[str]:
    return Counter(name for name, _ in metric_rows(run_dir))


# ---- regression: the example -------------------------------------------
@pytest.mark.parametrize("flush_first", [False, True], ids=["before-first-flush", "after-first-flush"])
def test_a_multi_element_tensor_loses_no_row(tmp_path: Path, flush_first: bool) -> None:
    steps = 60
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        for step in range(steps):
            rec.step(torch.tensor(1.0 / (step + 1)))
            if step == 3 and flush_first:
                rec.flush()
            if step == (5 if flush_first else 3):
                rec.log({"emb_norms": torch.randn(8)})
    found = counts(tmp_path / "run")
    assert found["train/loss"] == steps
    assert all(found[f"emb_norms/{s}"] == 1 for s in SUMMARY)
    stats = tuidiag.open_run(tmp_path / "run").manifest["stats"]
    assert stats["lost_rows"] == 0 and stats["rejected_values"] == 0 and stats["errors"] == 0


def _run_with_rejections(run_dir: Path) -> None:
    with tuidiag.Recorder(run_dir, flush_interval=3600) as rec:
        for step in range(30):
            rec.step(float(30 - step))
            if step == 4:
                rec.log({"phase": {"c": torch.ones(3, dtype=torch.complex64), "e": torch.empty(0, 2)}})


def test_ls_status_and_diagnose_say_what_was_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    _run_with_rejections(run_dir)
    capsys.readouterr()
    assert main(["ls", str(tmp_path)]) == 0
    assert "finished, 2 values rejected" in capsys.readouterr().out
    assert main(["status", str(run_dir), "--no-diagnosis"]) == 0
    assert "2 values rejected" in capsys.readouterr().out
    assert main(["diagnose", str(run_dir)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "2 values rejected" in out and "rejected 'phase/c': 'is a complex tensor" in out and "rejected 'phase/e': 'is an empty tensor" in out
    result = diagnose(open_run(run_dir))
    note = next(n for n in result.notes if n.code == "recorder_losses")
    assert note.evidence[0].startswith("the recorder reports in the whole run: 2 values rejected (last counted at step ")
    assert any("2 values rejected" in line for line in result.top.evidence)  # "healthy", but only on what was recorded
    before = diagnose(open_run(run_dir), at=3)
    assert all(n.code != "recorder_losses" for n in before.notes)  # nothing was rejected yet at step 3


async def test_the_monitor_header_says_what_was_rejected(tmp_path: Path) -> None:
    from tests.app_helpers import wait_for
    from textual.widgets import DataTable, Static

    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.run_screen import RunScreen

    _run_with_rejections(tmp_path / "run")
    app = TuidiagApp(tmp_path)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 1)
        table = app.screen.query_one("#runs", DataTable)
        assert "2 values rejected" in str(table.get_row_at(0)[2])
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        assert "2 values rejected" in str(app.screen.query_one("#run-title", Static).render())


# ---- step(loss) with values that are not one number --------------------------------
@pytest.mark.parametrize("loss", [torch.randn(8), "0.5", b"0.5", 1 + 2j, torch.empty(0), torch.ones((), dtype=torch.complex64),
                                  np.array([1.0, 2.0]), object(), 10**400],
                         ids=["tensor8", "str", "bytes", "complex", "empty", "complex-tensor", "array2", "object", "huge-int"])
def test_a_loss_that_is_not_one_number_is_refused_at_the_call(tmp_path: Path, loss: Any) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        rec.step(torch.tensor(1.0))
        rec.flush()
        for _ in range(3):
            rec.step(loss)
        rec.step(torch.tensor(2.0))
    assert [v for n, v in metric_rows(tmp_path / "run") if n == "train/loss"] == [1.0, 2.0]
    refused = [e for e in event_rows(tmp_path / "run") if e["kind"] == "rejected_value"]
    assert len(refused) == 1 and '"key": "train/loss"' in refused[0]["data"]
    stats = tuidiag.open_run(tmp_path / "run").manifest["stats"]
    assert stats["rejected_values"] == 3 and stats["lost_rows"] == 0 and stats["errors"] == 0


@pytest.mark.parametrize("loss", [None, 0.5, True, np.float16(0.5), np.array([0.5]), torch.tensor([0.5]), torch.tensor(1, dtype=torch.int64)],
                         ids=["none", "float", "bool", "np-half", "array1", "tensor1", "int-tensor"])
def test_a_loss_of_one_number_or_none_is_accepted(tmp_path: Path, loss: Any) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        rec.step(loss)
    rows = [v for n, v in metric_rows(tmp_path / "run") if n == "train/loss"]
    assert rows == ([] if loss is None else [float(np.asarray(loss).reshape(-1)[0])])
    assert tuidiag.open_run(tmp_path / "run").manifest["stats"]["rejected_values"] == 0


# ---- the documented conversions ---------------------------------------------------
def test_nested_dicts_strings_none_and_arrays(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        rec.log({"val": {"loss": 1, "acc": np.float32(0.5), "skip": None}, "flag": True, "big": 2**70,
                 "note": "epoch 1 done", "hist": [1.0, 2.0, float("nan"), 4.0]}, step=3)
    rows = dict(metric_rows(tmp_path / "run"))
    assert rows["val/loss"] == 1.0 and rows["val/acc"] == 0.5 and rows["flag"] == 1.0 and rows["big"] == float(2**70)
    assert "val/skip" not in rows
    assert [rows[f"hist/{s}"] for s in SUMMARY] == pytest.approx([1.0, 1.1, 1.5, 2.0, 3.0, 3.8, 4.0, 7 / 3, 1.0])
    texts = [e for e in event_rows(tmp_path / "run") if e["kind"] == "text"]
    assert [(t["message"], t["step"], t["data"]) for t in texts] == [("epoch 1 done", 3, '{"key": "note"}')]
    assert tuidiag.open_run(tmp_path / "run").manifest["stats"]["rejected_values"] == 0


_finite_or_not = st.floats(width=32, allow_nan=True, allow_infinity=True)


@settings(max_examples=examples(60), deadline=None)
@given(hnp.arrays(st.sampled_from([np.float32, np.float16, np.float64]), hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9),
                  elements=_finite_or_not))
def test_device_summary_matches_numpy_on_the_finite_elements(array: np.ndarray) -> None:
    if array.size < 2:
        return
    flat = array.reshape(-1).astype(np.float64)
    finite = flat[np.isfinite(flat)]
    expected = [*(np.quantile(finite, LEVELS) if finite.size else [math.nan] * 7),
                finite.mean() if finite.size else math.nan, flat.size - finite.size]
    on_device = tensor_summary(torch.from_numpy(array), LEVELS, QUANTILE_SAMPLE).numpy().astype(np.float64)
    on_host = np.asarray(array_summary(array))
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    for got in (on_device, on_host):
        assert np.allclose(got, expected, rtol=1e-4, atol=1e-6 * scale, equal_nan=True), (got, expected)


def test_a_huge_tensor_is_summarised_from_a_bounded_deterministic_sample() -> None:
    tensor = torch.arange(10 * QUANTILE_SAMPLE + 7, dtype=torch.float32)
    tensor[5] = float("inf")
    first = tensor_summary(tensor, LEVELS, QUANTILE_SAMPLE)
    assert torch.equal(first, tensor_summary(tensor, LEVELS, QUANTILE_SAMPLE))
    n = tensor.numel()
    assert first[-1].item() == 1.0  # every element counted, not only the sample
    assert first[-2].item() == pytest.approx((n * (n - 1) / 2 - 5) / (n - 1), rel=1e-5)
    assert first[0].item() == 0.0 and first[6].item() >= n - 12  # q0, q100 of the sample
    assert first[3].item() == pytest.approx(n / 2, rel=1e-3)


# ---- the writer isolates bad rows ----------------------------------------------------
def test_a_batch_that_does_not_match_its_names_costs_no_other_row(tmp_path: Path) -> None:
    writer = ShardWriter(tmp_path / "run", rank=0, flush_interval=3600)
    good, bad = Layout(["a", "b"]), Layout(["c"])
    for step in range(10):
        writer.submit(MetricBatch(step, 0.0, good, np.array([1.0, 2.0])))
        if step in (2, 7):
            writer.submit(MetricBatch(step, 0.0, bad, np.array([1.0, 2.0, 3.0])))
    writer.close()
    found = counts(tmp_path / "run")
    assert found["a"] == found["b"] == 10 and found["c"] == 0
    assert writer.lost_rows == 2 and found["recorder/lost_rows"] >= 1
    assert any(e["kind"] == "lost_rows" for e in event_rows(tmp_path / "run"))


def test_a_table_that_fails_to_build_is_rebuilt_from_the_parts_that_convert(tmp_path: Path) -> None:
    """A part past add_rows' checks (malformed here by hand) still costs only its own rows."""
    reported: list[str] = []
    writer = ShardWriter(tmp_path / "run", rank=0, flush_interval=3600, report_error=lambda where, exc: reported.append(where))
    writer.submit(MetricBatch(0, 0.0, Layout(["a"]), np.array([1.0])))
    writer.flush()
    writer._rows.append((np.zeros(3, np.int64), np.zeros(3), np.zeros(2, np.int32), np.zeros(3)))  # 2 names, 3 values
    writer.submit(MetricBatch(1, 0.0, Layout(["a"]), np.array([2.0])))
    writer.close()
    assert [v for n, v in metric_rows(tmp_path / "run") if n == "a"] == [1.0, 2.0]
    assert writer.lost_rows == 3 and "writer.metrics_table" in reported
    assert [v for n, v in metric_rows(tmp_path / "run") if n == "recorder/lost_rows"] == [3.0]


def test_event_data_json_cannot_encode_costs_no_event(tmp_path: Path) -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        rec.event("note", "circular", data=loop)
        rec.event("note", "tuple keys", data={(1, 2): 3})
        rec.event("note", "plain", data={"x": torch.ones(2)})
    notes = [e for e in event_rows(tmp_path / "run") if e["kind"] == "note"]
    assert [e["message"] for e in notes] == ["circular", "tuple keys", "plain"]
    assert notes[0]["data"] == '{"self": "<circular reference>"}' and notes[1]["data"] == '{"(1, 2)": 3}' and "tensor" in notes[2]["data"]


# ---- the property: no valid row is ever lost ------------------------------------------
_KEYS = st.sampled_from(["a", "b", "c/d", "e"])
_TORCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool,
                 torch.complex64]
_shapes = st.one_of(st.just(()), hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3),
                    hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
"""0-d, possibly empty or one-element, and multi-element shapes."""


@st.composite
def _tensors(draw: st.DrawFn) -> torch.Tensor:
    dtype = draw(st.sampled_from(_TORCH_DTYPES))
    values = draw(hnp.arrays(np.float32, _shapes, elements=st.floats(-1e4, 1e4, width=32) | st.sampled_from([math.nan, math.inf, -math.inf])))
    if dtype.is_floating_point:
        return torch.from_numpy(values).to(dtype)
    if dtype.is_complex:
        return torch.from_numpy(values).to(dtype) * (1 + 1j)
    return torch.from_numpy(np.asarray(np.nan_to_num(values, nan=0.0, posinf=7.0, neginf=-7.0))).to(dtype)


_np_arrays = hnp.arrays(st.sampled_from([np.float16, np.float32, np.float64, np.int64, np.uint64, np.uint8, np.bool_, np.complex64]),
                        _shapes)
_np_scalars = st.one_of(
    st.floats(width=16).map(np.float16), st.floats(width=32).map(np.float32), st.floats().map(np.float64),
    st.integers(-(2**63), 2**63 - 1).map(np.int64), st.integers(0, 2**64 - 1).map(np.uint64), st.booleans().map(np.bool_),
    st.complex_numbers(width=64, allow_nan=False).map(np.complex64), st.just(np.datetime64("2024-01-01")), st.just(np.str_("np text")),
)
_numbers = st.one_of(st.booleans(), st.integers(), st.floats(), _np_scalars)
_shaped = st.one_of(_tensors(), _np_arrays, st.lists(st.floats(allow_nan=True) | st.integers(-1000, 1000), max_size=4))
_others = st.one_of(st.none(), st.complex_numbers(allow_nan=False), st.text(max_size=5), st.binary(max_size=3), st.builds(object),
                    st.lists(st.text(max_size=2), min_size=1, max_size=2))
_leaves = st.one_of(_shaped, _shaped, _numbers, _others)
"""Tensors, arrays and lists twice as likely as the other kinds: they are where rows went missing."""
_values = st.recursive(_leaves, lambda inner: st.dictionaries(_KEYS, inner, max_size=3), max_leaves=6)
_calls = st.lists(st.one_of(
    st.tuples(st.just("step"), _leaves),
    st.tuples(st.just("log"), st.dictionaries(_KEYS, _values, min_size=1, max_size=4), st.none() | st.integers(0, 10**6) | st.just(2**70)),
    st.tuples(st.just("log"), st.dictionaries(_KEYS, _values, min_size=1, max_size=4), st.none()),
    st.tuples(st.just("batch"), _tensors()),
    st.tuples(st.just("event"), st.dictionaries(_KEYS, _values, max_size=2)),
    st.tuples(st.just("flush")),
), min_size=3, max_size=20)


class Expected:
    """What the documented rule says a call sequence records."""

    def __init__(self) -> None:
        self.rows: Counter[str] = Counter()
        self.values: dict[str, list[float] | None] = defaultdict(list)
        """Exact values of names only plain numbers went to (``None``: a tensor or array went there too)."""
        self.texts = 0
        self.events = 0
        self.rejected = 0
        self.rejected_keys: set[str] = set()

    def leaf(self, key: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                self.leaf(f"{key}/{k}", v)
        elif isinstance(value, str):
            self.texts += 1
        elif isinstance(value, torch.Tensor):
            self.shaped(key, value.is_complex(), value.numel())
        elif isinstance(value, (np.ndarray, list)):
            array = np.asarray(value)
            self.shaped(key, array.dtype.kind not in "biuf", array.size)
        else:
            number = self.number(value)
            if number is None:
                self.reject(key)
            else:
                self.rows[key] += 1
                if self.values[key] is not None:
                    self.values[key].append(number)

    def shaped(self, key: str, refused: bool, size: int) -> None:
        if refused or size == 0:
            self.reject(key)
        elif size == 1:
            self.rows[key] += 1
            self.values[key] = None
        else:
            for suffix in SUMMARY:
                self.rows[f"{key}/{suffix}"] += 1
                self.values[f"{key}/{suffix}"] = None

    def loss(self, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, torch.Tensor):
            ok = not value.is_complex() and value.numel() == 1
        elif isinstance(value, (np.ndarray, list)):
            array = np.asarray(value)
            ok = array.dtype.kind in "biuf" and array.size == 1
        else:
            ok = not isinstance(value, str) and self.number(value) is not None
        if ok:
            self.rows["train/loss"] += 1
        else:
            self.reject("train/loss")

    def reject(self, key: str, values: int = 1) -> None:
        self.rejected += values
        self.rejected_keys.add(key)

    @staticmethod
    def number(value: Any) -> float | None:
        if isinstance(value, (complex, np.complexfloating, bytes, np.datetime64)) or type(value) is object:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**1024:
            return None
        return float(value)


def _leaf_count(values: dict[str, Any]) -> int:
    return sum(_leaf_count(v) if isinstance(v, dict) else v is not None for v in values.values())


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_calls)
def test_no_valid_row_is_ever_lost(calls: list[tuple[Any, ...]]) -> None:
    expected = Expected()
    with tempfile.TemporaryDirectory(prefix="tuidiag-values-") as tmp:
        run_dir = Path(tmp) / "run"
        with tuidiag.Recorder(run_dir, flush_interval=3600, capture_nonfinite=False) as rec:
            for call in calls:
                if call[0] == "step":
                    rec.step(call[1])
                    expected.loss(call[1])
                elif call[0] == "log":
                    metrics = {f"u/{k}": v for k, v in call[1].items()}
                    rec.log(metrics, step=call[2])
                    if call[2] is not None and call[2] >= 2**63:
                        expected.reject("step", _leaf_count(metrics))
                    else:
                        for key, value in metrics.items():
                            expected.leaf(key, value)
                elif call[0] == "batch":
                    rec.batch(call[1])
                    if call[1].is_complex() and call[1].numel():  # no input statistics of a complex batch
                        expected.reject("<batch>")
                elif call[0] == "event":
                    rec.event("user", "a note", data=call[1])
                    expected.events += 1
                else:
                    rec.flush()
        rows = metric_rows(run_dir)
        events = event_rows(run_dir)
        stats = tuidiag.open_run(run_dir).manifest["stats"]
    found = Counter(name for name, _ in rows if name.startswith("u/") or name == "train/loss")
    assert found == expected.rows
    for name, values in expected.values.items():
        if values:
            got = sorted((v for n, v in rows if n == name), key=_order)
            assert got == pytest.approx(sorted(values, key=_order), nan_ok=True), name
    kinds = Counter(e["kind"] for e in events)
    assert kinds["text"] == expected.texts and kinds["user"] == expected.events
    assert stats["rejected_values"] == expected.rejected and stats["lost_rows"] == 0 and stats["dropped_rows"] == 0
    refused = {e["data"] for e in events if e["kind"] == "rejected_value"}
    assert len(refused) == len(expected.rejected_keys)
    assert all(any(f'"key": "{key}"' in data for data in refused) for key in expected.rejected_keys)


def _order(value: float) -> tuple[int, float]:
    return (1, 0.0) if math.isnan(value) else (0, value)


@pytest.mark.parametrize("sessions", [2, 3])
def test_rejections_count_over_every_session_of_a_resumed_run(tmp_path: Path, sessions: int) -> None:
    """A resumed run's counts are the whole run's: run.json, ls, the counter rows and diagnose agree with the events."""
    run_dir = tmp_path / "run"
    for _ in range(sessions):
        with tuidiag.Recorder(run_dir, flush_interval=30.0, resume="allow") as rec:
            for _ in range(5):
                rec.step(1.0)
            rec.log({"cplx": torch.ones(2, dtype=torch.complex64)})
    run = tuidiag.open_run(run_dir)
    assert len([e for e in run.events if e.kind == "rejected_value"]) == sessions
    assert run.manifest["stats"]["rejected_values"] == sessions
    assert run.series("recorder/rejected_values").values[-1] == sessions
    assert any(f"{sessions} values rejected" in line for line in next(n for n in diagnose(open_run(run_dir)).notes).evidence)
