"""Each failure class of "nothing raises into the training, no good value is lost with a bad one".

Generated cases for each class, with the issue's examples kept as regression tests:

- configs of any shape (hypothesis): the recorder starts, ``run.json`` stays JSON,
  JSON-native values round-trip exactly and what cannot be stored is counted;
- corrupt ``run.json`` on resume (every field replaced by null, inf, nan, a huge or
  negative number, a wrong type, or missing; the file truncated, empty, binary or
  nested 100,000 deep), with ``resume="allow"`` and the default: every new row on disk;
- metric names of any characters (hypothesis): distinct names stay distinct on
  disk and when quoted in evidence;
- run directories whose path holds a non-UTF-8 byte or a NUL: reported at once, the
  rows recorded beside it, and ``run.json``, ``ls`` and ``status`` say "degraded";
- the documented construction errors, and nothing else.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
import tuidiag
from tuidiag.cli.main import main
from tuidiag.diagnosis.evidence import quoted
from tuidiag.format import EVENT_CAPTURE
from tuidiag.store.json_values import CONFIG_LIMITS, to_json

torch.set_num_threads(1)
EXAMPLES = int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", "30"))


def metric_counts(run_dir: Path) -> Counter[str]:
    """Rows per metric name in the run's shards, read with pyarrow (not tuidiag's reader)."""
    return Counter(name for path in sorted((run_dir / "metrics").glob("*.parquet")) for name in pq.read_table(path).column("metric").to_pylist())


def metric_rows(run_dir: Path, name: str) -> list[tuple[int, float]]:
    rows = []
    for path in sorted((run_dir / "metrics").glob("*.parquet")):
        table = pq.read_table(path).to_pydict()
        rows += [(s, v) for n, s, v in zip(table["metric"], table["step"], table["value"]) if n == name]
    return sorted(rows)


def event_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [row for path in sorted((run_dir / "events").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def stats_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["stats"]


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr refused")


# ---- configs ------------------------------------------------------------------------
def test_a_5000_level_config_and_a_config_that_contains_itself_start_the_run(tmp_path: Path) -> None:
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    loop: dict[str, Any] = {"lr": 0.1}
    loop["self"] = loop
    for name, config in (("deep", deep), ("loop", loop)):
        with tuidiag.Recorder(tmp_path / name, config=config, flush_interval=3600) as rec:
            for step in range(20):
                rec.step(1.0 / (step + 1))
        assert metric_counts(rec.run_dir)["train/loss"] == 20
        manifest = json.loads((rec.run_dir / "run.json").read_text(encoding="utf-8"))
        assert manifest["stats"]["rejected_values"] == 1 and manifest["stats"]["errors"] == 0
    assert manifest["config"] == {"lr": 0.1, "self": "<circular reference>"}


def test_a_config_of_tensors_arrays_sets_odd_keys_and_huge_strings(tmp_path: Path) -> None:
    config = {"t": torch.arange(3.0), "one": torch.tensor([2.5]), "n": np.arange(3), "f": np.float32(0.5), "s": {1, 2},
              "bad": BadRepr(), 1: "int", "1": "str", (1, 2): "tuple", "huge": "x" * 10_000_000, "nan": math.nan}
    with tuidiag.Recorder(tmp_path / "run", config=config, flush_interval=3600) as rec:
        rec.step(1.0)
    stored = tuidiag.open_run(rec.run_dir).manifest["config"]
    assert stored["one"] == 2.5 and stored["f"] == 0.5 and stored["s"] == [1, 2] and stored["nan"] == "nan"
    assert stored["t"].startswith("tensor(") and stored["n"].startswith("array(")
    assert stored["1"] == "str" and stored["1 (int)"] == "int" and stored["(1, 2)"] == "tuple"  # distinct keys stay distinct
    assert stored["bad"] == "<BadRepr: RuntimeError>" and len(stored["huge"]) == 65_536
    assert stats_of(rec.run_dir)["rejected_values"] == 2 and metric_counts(rec.run_dir)["train/loss"] == 1


_json_native = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**200), 2**200) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=30)
_hostile_leaf = st.sampled_from(["badrepr", "tensor", "array", "set", "nan", "bytes", "hugeint", "tuple-key", "int-key"])


def _hostile(kind: str) -> Any:
    return {"badrepr": BadRepr, "tensor": lambda: torch.ones(2), "array": lambda: np.ones(2), "set": lambda: {3},
            "nan": lambda: math.inf, "bytes": lambda: b"\xff", "hugeint": lambda: 2**20_000,
            "tuple-key": lambda: {(1, 2): 1}, "int-key": lambda: {1: 1, "1": 2}}[kind]()


@settings(max_examples=EXAMPLES, deadline=None)
@given(_json_native, st.lists(st.tuples(st.text(max_size=6), _hostile_leaf), max_size=4), st.integers(0, 60))
def test_any_config_is_stored_as_json_and_json_values_round_trip(native: Any, hostile: list[tuple[str, str]], depth: int) -> None:
    """JSON-native values come back exactly; hostile ones become placeholders; nothing raises or nests past the limit."""
    assume(_depth(native) < CONFIG_LIMITS.depth - 2)
    config: dict[Any, Any] = {"native": native}
    nested: dict[str, Any] = {}
    for _ in range(depth):
        nested = {"d": nested}
    config["nested"] = nested
    for key, kind in hostile:
        config[f"h/{key}"] = _hostile(kind)
    converted = to_json(config, CONFIG_LIMITS)
    text = json.dumps(converted.value, allow_nan=False)
    back = json.loads(text)
    assert back["native"] == native
    assert _depth(back) <= CONFIG_LIMITS.depth + 1
    expected_notes = sum(kind in ("badrepr", "hugeint") for kind in dict(hostile).values()) + (depth + 1 >= CONFIG_LIMITS.depth)
    assert len(converted.notes) == expected_notes, converted.notes


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


# ---- corrupt run.json on resume ----------------------------------------------------------
FIELDS = ["format_version", "run_id", "name", "created", "host", "pid", "uid", "command", "config", "versions", "world_size",
          "flush_interval", "status", "heartbeat", "ended", "last_step", "stats", "session", "resumed", "degraded", "factory"]
REPLACEMENTS: dict[str, Any] = {"null": None, "inf": math.inf, "-inf": -math.inf, "nan": math.nan, "huge": 10**30,
                                "huge-int64": 2**63 - 1, "negative": -5, "text": "x", "list": [1], "object": {"a": 1},
                                "true": True, "missing": KeyError}
WHOLE_FILE = {"truncated": lambda text: text[: len(text) // 2].encode(), "empty": lambda text: b"",
              "binary": lambda text: bytes(range(256)) * 4, "array": lambda text: b"[1, 2]",
              "deep": lambda text: b"[" * 100_000 + b"]" * 100_000, "not-utf8": lambda text: text.encode()[:40] + b"\xff\xfe" + text.encode()[40:]}
PREVIOUS_STEPS = 10


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("base") / "run"
    with tuidiag.Recorder(run_dir, config={"lr": 0.1}, flush_interval=3600) as rec:
        for step in range(PREVIOUS_STEPS):
            rec.step(0.5)
    return run_dir


def _corrupt(run_dir: Path, corruption: str) -> None:
    path = run_dir / "run.json"
    text = path.read_text(encoding="utf-8")
    if corruption in WHOLE_FILE:
        path.write_bytes(WHOLE_FILE[corruption](text))
        return
    field, replacement = corruption.split(":")
    manifest = json.loads(text)
    if REPLACEMENTS[replacement] is KeyError:
        manifest.pop(field, None)
    else:
        manifest[field] = REPLACEMENTS[replacement]
    path.write_text(json.dumps(manifest), encoding="utf-8")


def _resume_into(finished_run: Path, target: Path, corruption: str, resume: str | None) -> tuple[Path, int]:
    """Copy the run, damage its run.json, record 20 steps into it; the directory written and the first new step."""
    shutil.copytree(finished_run, target)
    _corrupt(target, corruption)
    kwargs = {} if resume is None else {"resume": resume}
    with tuidiag.Recorder(target, flush_interval=3600, **kwargs) as rec:
        first = None
        for i in range(20):
            step = rec.step(0.25)
            first = step if first is None else first
            rec.log({"new": float(i)})
    return rec.run_dir, first


_CORRUPTIONS = sorted(WHOLE_FILE) + [f"{field}:{r}" for field in FIELDS for r in REPLACEMENTS]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(_CORRUPTIONS), st.sampled_from([None, "allow"]))
def test_a_corrupt_run_json_never_costs_a_new_row(finished_run: Path, tmp_path: Path, corruption: str, resume: str | None) -> None:
    target = Path(tempfile.mkdtemp(dir=tmp_path)) / "run"
    run_dir, first = _resume_into(finished_run, target, corruption, resume)
    new = metric_rows(run_dir, "new")
    assert [v for _, v in new] == [float(i) for i in range(20)]
    if run_dir == target:  # continued: counts on after the last step on disk
        assert resume == "allow" and first == PREVIOUS_STEPS
        assert len(metric_rows(run_dir, "train/loss")) == PREVIOUS_STEPS + 20
    else:  # a fresh run beside it
        assert first == 0 and len(metric_rows(run_dir, "train/loss")) == 20
    assert [s for s, _ in new] == list(range(first, first + 20))
    manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "finished" and manifest["stats"]["lost_rows"] == 0 and manifest["stats"]["dropped_rows"] == 0
    assert manifest["last_step"] == first + 19
    read = tuidiag.open_run(run_dir)
    assert len(read.series("new").values) == 20


@pytest.mark.parametrize("resume", [None, "allow"], ids=["default", "allow"])
@pytest.mark.parametrize("corruption", ["resumed:null", "resumed:inf", "last_step:huge", "last_step:huge-int64"])
def test_the_issue_s_corrupt_manifests(finished_run: Path, tmp_path: Path, corruption: str, resume: str | None) -> None:
    run_dir, first = _resume_into(finished_run, tmp_path / "run", corruption, resume)
    assert len(metric_rows(run_dir, "new")) == 20 and first == (PREVIOUS_STEPS if resume == "allow" else 0)
    assert stats_of(run_dir)["errors"] == 0


def test_must_on_a_corrupt_run_continues_it(finished_run: Path, tmp_path: Path) -> None:
    run_dir, first = _resume_into(finished_run, tmp_path / "run", "last_step:text", "must")
    assert run_dir == tmp_path / "run" and first == PREVIOUS_STEPS and len(metric_rows(run_dir, "new")) == 20


# ---- events -------------------------------------------------------------------------------
def test_hostile_event_data_costs_no_later_event(tmp_path: Path) -> None:
    loop: dict[str, Any] = {}
    loop["loop"] = loop
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        rec.step(1.0)
        rec.event("note", "tuple key", data={(1, 2): "x"})
        rec.event("note", "circular", data=loop)
        rec.event("note", "repr raises", data={"bad": BadRepr()})
        for step in range(3):
            rec.step(math.nan if step == 2 else 1.0)
        rec.event("note", "after")
    events = event_rows(rec.run_dir)
    notes = [(e["message"], json.loads(e["data"])) for e in events if e["kind"] == "note"]
    assert notes == [("tuple key", {"(1, 2)": "x"}), ("circular", {"loop": "<circular reference>"}),
                     ("repr raises", {"bad": "<BadRepr: RuntimeError>"}), ("after", {})]
    assert [e["step"] for e in events if e["kind"] == EVENT_CAPTURE] == [3]
    assert stats_of(rec.run_dir)["rejected_values"] == 2 and stats_of(rec.run_dir)["errors"] == 0


# ---- log: one bad value, the good ones kept ---------------------------------------------------
def test_a_bad_value_in_a_log_call_keeps_the_good_ones(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        for step in range(5):
            rec.step(1.0)
            rec.log({"c/hugeint": 10**400, "c/hugeint_ok": 1.0, "c/complex": 1j, "c/ok2": torch.tensor(2.0)})
    counts = metric_counts(rec.run_dir)
    assert counts["c/hugeint_ok"] == 5 and counts["c/ok2"] == 5 and counts["c/hugeint"] == 0
    assert stats_of(rec.run_dir)["rejected_values"] == 10


# ---- metric names -----------------------------------------------------------------------------
def test_names_that_sanitising_would_merge_stay_distinct(tmp_path: Path) -> None:
    names = ["a?", "a\ud800", "a\udcff", "a\ufffd", "a\x00", "a\x01", "a", "a\u202e"]
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        for step in range(4):
            rec.log({name: float(i) for i, name in enumerate(names)}, step=step)
    counts = metric_counts(rec.run_dir)
    stored = [n for n in names if "\ud800" not in n and "\udcff" not in n]
    assert {n: counts[n] for n in stored} == {n: 4 for n in stored}
    assert set(tuidiag.open_run(rec.run_dir).metric_names) >= set(stored)
    assert stats_of(rec.run_dir)["rejected_values"] == 8  # the two surrogate names, 4 steps each
    assert len({quoted(n) for n in names}) == len(names)


_any_text = st.text(st.characters(blacklist_categories=()), max_size=6)
"""Every code point, lone surrogates and controls included."""


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(_any_text, min_size=1, max_size=8, unique=True))
def test_distinct_names_stay_distinct_on_disk(names: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="tuidiag-names-") as tmp:
        with tuidiag.Recorder(Path(tmp) / "run", flush_interval=3600) as rec:
            for step in range(2):
                rec.log({f"n/{name}": float(i) for i, name in enumerate(names)}, step=step)
        counts = metric_counts(rec.run_dir)
        storable = [n for n in names if _utf8(n)]
        for name in storable:
            assert counts[f"n/{name}"] == 2, name
        assert sum(v for k, v in counts.items() if k.startswith("n/")) == 2 * len(storable)
        assert stats_of(rec.run_dir)["rejected_values"] == 2 * (len(names) - len(storable))


@settings(max_examples=examples(200), deadline=None)
@given(_any_text, _any_text)
def test_evidence_quotes_distinct_names_differently(a: str, b: str) -> None:
    assert ast.literal_eval(quoted(a)) == a
    assert (quoted(a) == quoted(b)) == (a == b)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ---- run directories -----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [b"bad\xff", b"bad\x00name"], ids=["non-utf8", "nul"])
def test_a_run_directory_that_cannot_be_used_is_reported_at_once_and_degraded(tmp_path: Path, bad: bytes,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    asked = os.fsdecode(os.fsencode(tmp_path) + b"/" + bad)
    rec = tuidiag.Recorder(asked, flush_interval=3600)
    said = capsys.readouterr().err
    assert "cannot be used" in said and rec.errors.count == 1  # at once, before any step
    for step in range(50):
        rec.step(1.0 / (step + 1))
    rec.close()
    escaped = tmp_path / bad.decode("latin-1").replace("\xff", "%FF").replace("\x00", "%00")
    assert rec.run_dir == escaped and not Path(asked.replace("\x00", "")).exists()
    assert metric_counts(escaped)["train/loss"] == 50
    manifest = json.loads((escaped / "run.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "finished" and manifest["degraded"] and manifest["stats"]["errors"] == 1
    assert main(["ls", str(tmp_path)]) == 0
    assert "finished, degraded" in capsys.readouterr().out
    assert main(["status", str(escaped), "--no-diagnosis"]) == 0
    assert "degraded, 1 recorder error" in capsys.readouterr().out
    assert main(["diagnose", str(escaped)]) == 0
    assert "the run is degraded: 'the path asked for " in " ".join(capsys.readouterr().out.split())


def test_a_path_below_a_file_is_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("not a directory")
    rec = tuidiag.Recorder(tmp_path / "file" / "run", flush_interval=3600)
    assert "recorder error in start" in capsys.readouterr().err and rec.errors.count == 1
    for step in range(5):
        rec.step(1.0)
    rec.close()  # never raises; the rows had nowhere to go and the errors say so
    assert rec.errors.count >= 1


# ---- the documented construction errors ------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"run_dir": 5}, {"run_dir": ""}, {"run_dir": None}, {"resume": "sometimes"}, {"resume": ["allow"]}, {"flush_interval": 0},
    {"flush_interval": -1.0}, {"flush_interval": math.inf}, {"flush_interval": "1"}, {"flush_interval": True}, {"grads_every": -1},
    {"weights_every": 2.5}, {"activations_every": "1"}, {"inputs_every": None}, {"capture_max_bytes": -1}, {"max_queue": 0},
    {"name": 3}, {"factory": b"x:y"}, {"start_step": 2**70}, {"start_step": "3"}, {"control": torch.ones(2)},
], ids=lambda kwargs: "-".join(f"{k}={v!r}"[:30] for k, v in kwargs.items()))
def test_a_wrong_constructor_argument_raises_argument_error_before_anything_is_created(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    kwargs = {"run_dir": tmp_path / "run", **kwargs}
    with pytest.raises(tuidiag.ArgumentError) as raised:
        tuidiag.Recorder(**kwargs)
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ValueError)
    assert not (tmp_path / "run").exists()


def test_resume_must_without_a_run_still_raises_resume_error(tmp_path: Path) -> None:
    with pytest.raises(tuidiag.ResumeError):
        tuidiag.Recorder(tmp_path / "run", resume="must")


def test_an_infinite_max_grad_norm_keeps_run_json_writable(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 1)
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        rec.watch(model, torch.optim.SGD(model.parameters(), lr=0.1), max_grad_norm=math.inf)
        model(torch.ones(1, 2)).sum().backward()
        rec.step(1.0)
    manifest = json.loads((rec.run_dir / "run.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "finished" and manifest["stats"]["errors"] == 0
