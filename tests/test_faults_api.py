"""Nothing the public API is given raises into the training, and no good value is lost with a bad one.

A hypothesis state machine drives ``Recorder(...)`` (constructor arguments, config
shapes), ``watch``, ``batch``, ``step``, ``log``, ``event``, ``flush``, ``close`` and
the context manager with hostile arguments: values that are not numbers, names that
sanitising would merge, keys whose ``str()`` raises, event data that contains itself
or whose ``repr`` raises, configs 40 levels deep, steps beyond int64, statuses and
timeouts of the wrong type. A model written here from the documented rules (README
"Logging values", docs/guarantees.md "Nothing raises into the training") says what each
call records. After each sequence the shards are read with pyarrow and checked:

- no exception escaped, except :class:`tuidiag.ArgumentError` from a constructor
  given a documented wrong argument (and then nothing was created on disk);
- every valid row is on disk under its exact name (exact counts), names that
  differ only in ``?``, NUL, a control or U+FFFD stay apart;
- every event with a valid kind and message is on disk, its hostile data replaced
  by placeholders; a capture event after all of it still arrives;
- ``run.json`` counts exactly the rejections the model predicts, no recorder
  error, no lost or dropped row.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from collections import Counter, deque
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

import tuidiag
from tuidiag.format import EVENT_CAPTURE

torch.set_num_threads(1)
EXAMPLES = int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", "25"))
INT64 = range(-(2**63), 2**63)


# ---- hostile objects ------------------------------------------------------------
class BadRepr:
    """An object whose ``repr`` and ``str`` raise (a half-built user class)."""

    def __repr__(self) -> str:
        raise RuntimeError("repr refused")

    __str__ = __repr__


class BadKey:
    """A hashable key whose ``str`` raises."""

    def __str__(self) -> str:
        raise ValueError("no text")

    __repr__ = __str__
    __hash__ = object.__hash__


BAD_KEY = BadKey()


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"d": value}
    return value


def cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"x": 1}
    value["self"] = value
    return value


def cyclic_list() -> list[Any]:
    value: list[Any] = [1.0]
    value.append(value)
    return value


# ---- what each call records, by the documented rules ----------------------------
LOG_VALUES: dict[str, tuple[str, Any]] = {
    "float": ("row", lambda: 1.5), "int": ("row", lambda: 7), "bool": ("row", lambda: True),
    "np32": ("row", lambda: np.float32(0.5)), "tensor0": ("row", lambda: torch.tensor(0.25)),
    "array1": ("row", lambda: np.array([3.0])), "nan": ("row", lambda: math.nan),
    "tensor4": ("summary", lambda: torch.randn(4)), "list3": ("summary", lambda: [1.0, 2.0, 3.0]),
    "text": ("text", lambda: "hello"), "none": ("skip", lambda: None),
    "hugeint": ("reject", lambda: 10**400), "complex": ("reject", lambda: 1 + 2j), "object": ("reject", object),
    "bytes": ("reject", lambda: b"x"), "empty": ("reject", lambda: torch.empty(0)), "badrepr": ("reject", BadRepr),
    "nested": ("nested", lambda: {"k": 2.0, "n": None}),
}
SUMMARY = 9
"""Rows of a multi-element tensor or list: 7 quantiles, mean, non-finite count."""
LOG_KEYS: dict[str, Any] = {
    "a?": "a?", "a-surrogate": "a\ud800", "a-nul": "a\x00", "a-ctrl": "a\x01", "a-fffd": "a\ufffd", "e-acute": "\u00e9",
    "slash": "x/y", "int-1": 1, "str-1": "1", "badkey": BAD_KEY,
}
LOSSES: dict[str, tuple[str, Any]] = {
    "float": ("ok", lambda: 0.5), "tensor": ("ok", lambda: torch.tensor(0.25)), "none": ("none", lambda: None),
    "nan": ("nonfinite", lambda: math.nan), "inf-tensor": ("nonfinite", lambda: torch.tensor(math.inf)),
    "str": ("reject", lambda: "0.5"), "tensor3": ("reject", lambda: torch.randn(3)), "complex": ("reject", lambda: 1 + 2j),
}
STEPS = [None, None, None, 0, 5, -3, 2**63 - 1, -(2**63), 2**63, 2**70, "x", 1.5]
EVENT_DATA: dict[str, tuple[int, Any]] = {
    "none": (0, lambda: None), "plain": (0, lambda: {"a": 1}), "tuple-key": (0, lambda: {(1, 2): "x"}),
    "int-and-str-key": (0, lambda: {1: "a", "1": "b"}), "tensor": (0, lambda: {"t": torch.ones(2)}), "set": (0, lambda: {"s": {1, 2}}),
    "cycle": (1, cyclic_dict), "badrepr": (1, lambda: {"bad": BadRepr()}), "deep": (1, lambda: {"deep": deep(40)}),
    "long": (1, lambda: {"long": "x" * 70_000}), "hugeint": (1, lambda: {"big": 2**20_000}),
    "list": (1, lambda: [1, 2]), "str": (1, lambda: "text"), "badrepr-alone": (2, BadRepr),
}
"""Each data value and the number of parts of it that cannot be kept as they are (each a rejected value)."""
KINDS = {"user": "user", "user?": "user?", "user-nul": "user\x00", "user-fffd": "user\ufffd", "user-acute": "user \u00e9",
         "surrogate": "user\ud800", "badstr": BAD_KEY, "long": "k" * 1001}
VALID_KINDS = {"user", "user?", "user-nul", "user-fffd", "user-acute"}
MESSAGES = {"plain": "a note", "long": "m" * 70_000, "ansi": "\x1b[31mred", "number": 123, "badstr": BAD_KEY}
SEVERITIES = {"info": "info", "warning": "warning", "odd": "odd", "badstr": BAD_KEY}
BATCHES: dict[str, tuple[bool, bool, bool, Any]] = {
    # (kept by reference, summarised without fault, savable in a capture)
    "tensor": (True, True, True, lambda: torch.randn(2, 3)), "int": (True, True, True, lambda: torch.arange(4)),
    "complex": (True, False, True, lambda: torch.ones(3, dtype=torch.complex64)), "text": (True, True, True, lambda: "text"),
    "none": (True, True, True, lambda: None), "list": (True, True, True, lambda: [1, 2]), "cycle": (False, True, False, cyclic_list),
    "badrepr": (True, True, False, BadRepr),
}
KEPT_BATCHES = 16
"""Batches the recorder keeps (``tuidiag.recorder.recent_batches``: live jobs are on by default)."""
WATCHES: dict[str, tuple[int, tuple[Any, ...]]] = {
    "ok": (0, ("model", "sgd", 1.0)), "not-a-model": (1, ("text", None, None)), "bad-optimizer": (1, ("model", "text", None)),
    "nan-norm": (1, ("model", None, math.nan)), "inf-norm": (0, ("model", None, math.inf)), "negative-norm": (1, ("model", None, -1.0)),
    "both-bad": (2, ("model", "text", "x")),
}
FLUSHES = {"default": (0, ()), "short": (0, (0.5,)), "text": (1, ("x",)), "nan": (1, (math.nan,)), "negative": (1, (-1,))}
CONFIG_PIECES: dict[str, tuple[int, Any]] = {
    "lr": (0, lambda: 0.1), "tensor": (0, lambda: torch.randn(3)), "array": (0, lambda: np.arange(3)), "set": (0, lambda: {1, 2}),
    "badrepr": (1, BadRepr), "deep": (1, lambda: deep(40)), "cycle": (1, cyclic_dict), "long": (1, lambda: "x" * 70_000),
    "hugeint": (1, lambda: 2**20_000), "tuple": (0, lambda: {(1, 2): "t"}), "nan": (0, lambda: math.nan),
}
BAD_ARGUMENTS = [("run_dir", 5), ("run_dir", ""), ("resume", "sometimes"), ("resume", None), ("flush_interval", 0),
                 ("flush_interval", "1"), ("flush_interval", math.nan), ("grads_every", -1), ("grads_every", 1.5),
                 ("max_queue", 0), ("name", 5), ("factory", b"x"), ("start_step", 2**70), ("start_step", "3"),
                 ("capture_nonfinite", torch.ones(2))]


def as_step(value: Any) -> int | None:
    """What ``int(step)`` gives, within int64; ``None`` when the recorder must refuse it."""
    try:
        number = int(value)
    except Exception:
        return None
    return number if number in INT64 else None


class Expected:
    """The rows, events and rejections the documented rules predict."""

    def __init__(self, capture: bool, inputs_every: int) -> None:
        self.rows: Counter[str] = Counter()
        self.losses = 0
        self.texts = 0
        self.events: Counter[str] = Counter()
        self.rejected = 0
        self.capture, self.inputs_every = capture, inputs_every
        self.captures = 0
        self.next_step, self.current_step = 0, -1
        self.batches: deque[tuple[int, bool]] = deque(maxlen=KEPT_BATCHES)

    def implicit(self) -> int:
        return self.current_step if self.current_step >= 0 else max(self.next_step, 0)

    def step(self, loss: str, step: Any) -> None:
        kind = LOSSES[loss][0]
        s = self.next_step if step is None else as_step(step)
        if s is None or s not in INT64:
            self.rejected += 1 + (kind != "none")
            return
        self.current_step, self.next_step = s, s + 1
        if kind in ("ok", "nonfinite"):
            self.losses += 1
        elif kind == "reject":
            self.rejected += 1
        if kind == "nonfinite" and self.capture and not self.captures:
            self.captures = 1
            savable = next((ok for at, ok in self.batches if at == s), True)
            self.rejected += not savable
            self.batches.clear()

    def leaf(self, name: str | None, label: str, nested: bool = False) -> None:
        kind = LOG_VALUES[label][0]
        if kind == "skip":
            return
        if kind == "nested":
            if name is None:
                self.rejected += 1  # a key that cannot be text: its whole value
            else:
                self.leaf(f"{name}/k", "float", True)
            return
        if name is None or "\ud800" in name or kind == "reject":
            self.rejected += 1
        elif kind == "row":
            self.rows[name] += 1
        elif kind == "summary":
            for suffix in ("q0", "q5", "q25", "q50", "q75", "q95", "q100", "mean", "nonfinite"):
                self.rows[f"{name}/{suffix}"] += 1
        elif kind == "text":
            self.texts += 1

    def log(self, items: list[tuple[str, str]], step: Any) -> None:
        names = {key: (f"u/{LOG_KEYS[key]}" if LOG_KEYS[key] is not BAD_KEY else None) for key, _ in items}
        if step is not None and as_step(step) is None:
            self.rejected += sum({"skip": 0, "nested": 1}.get(LOG_VALUES[label][0], 1) for _, label in items)
            return
        for key, label in items:
            self.leaf(names[key], label)

    def event(self, kind: str, severity: str, message: str, data: str, step: Any) -> None:
        if step is not None and as_step(step) is None:
            self.rejected += 1
            return
        if kind not in VALID_KINDS or severity == "badstr" or message == "badstr":
            self.rejected += 1
            return
        self.events[KINDS[kind]] += 1
        self.rejected += EVENT_DATA[data][0]

    def batch(self, label: str) -> None:
        kept, summarised, savable, _ = BATCHES[label]
        if kept:
            self.batches.append((self.next_step, savable))
        else:  # it cannot be kept for a capture: rejected at the call
            self.rejected += 1
        if self.inputs_every > 0 and self.next_step % self.inputs_every == 0 and not summarised:
            self.rejected += 1


# ---- the state machine ------------------------------------------------------------
class RecorderMachine(RuleBasedStateMachine):
    """Random call sequences over the whole public API, each checked against :class:`Expected`."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory(prefix="tuidiag-api-")
        self.rec: Any = None
        self.expected: Expected | None = None

    @initialize(data=st.data())
    def construct(self, data: st.DataObject) -> None:
        root = Path(self.tmp.name)
        bad = data.draw(st.none() | st.sampled_from(range(len(BAD_ARGUMENTS))), label="bad argument")
        if bad is not None:
            key, value = BAD_ARGUMENTS[bad]
            kwargs: dict[str, Any] = {"run_dir": root / "refused", key: value}
            with pytest.raises(tuidiag.ArgumentError):
                tuidiag.Recorder(**kwargs)
            assert not (root / "refused").exists()  # refused before anything was created
        form = data.draw(st.sampled_from(["str", "path", "bytes"]), label="run_dir form")
        path = root / "run"
        run_dir = {"str": str(path), "path": path, "bytes": os.fsencode(path)}[form]
        config, notes = data.draw(configs(), label="config")
        capture = data.draw(st.booleans(), label="capture_nonfinite")
        inputs_every = data.draw(st.sampled_from([0, 1, 2]), label="inputs_every")
        flush_interval = data.draw(st.sampled_from([3600.0, 0.05]), label="flush_interval")
        self.rec = tuidiag.Recorder(run_dir, config=config(), flush_interval=flush_interval, capture_nonfinite=capture,
                                    inputs_every=inputs_every, weights_every=1, activations_every=1)
        self.expected = Expected(capture, inputs_every)
        self.expected.rejected += notes

    @rule(loss=st.sampled_from(sorted(LOSSES)), step=st.sampled_from(STEPS))
    def step(self, loss: str, step: Any) -> None:
        self.rec.step(LOSSES[loss][1](), step=step)
        self.expected.step(loss, step)

    @rule(items=st.lists(st.tuples(st.sampled_from(sorted(LOG_KEYS)), st.sampled_from(sorted(LOG_VALUES))), min_size=1, max_size=5,
                         unique_by=lambda item: item[0]),
          step=st.sampled_from([None, None, 3, "x", 2**70]))
    def log(self, items: list[tuple[str, str]], step: Any) -> None:
        inner = {LOG_KEYS[key]: LOG_VALUES[label][1]() for key, label in items}
        self.rec.log({"u": inner}, step=step)
        self.expected.log(items, step)

    @rule()
    def log_not_a_mapping(self) -> None:
        self.rec.log([("u/x", 1.0)])
        self.expected.rejected += 1

    @rule(kind=st.sampled_from(sorted(KINDS)), severity=st.sampled_from(sorted(SEVERITIES)), message=st.sampled_from(sorted(MESSAGES)),
          data=st.sampled_from(sorted(EVENT_DATA)), step=st.sampled_from([None, None, 2, "x"]))
    def event(self, kind: str, severity: str, message: str, data: str, step: Any) -> None:
        self.rec.event(KINDS[kind], MESSAGES[message], severity=SEVERITIES[severity], data=EVENT_DATA[data][1](), step=step)
        self.expected.event(kind, severity, message, data, step)

    @rule(label=st.sampled_from(sorted(BATCHES)))
    def batch(self, label: str) -> None:
        self.rec.batch(BATCHES[label][3]())
        self.expected.batch(label)

    @rule(label=st.sampled_from(sorted(WATCHES)))
    def watch(self, label: str) -> None:
        rejected, (model, optimizer, norm) = WATCHES[label]
        module = torch.nn.Linear(2, 1)
        objects = {"model": module, "text": "not this", "sgd": torch.optim.SGD(module.parameters(), lr=0.1), None: None}
        self.rec.watch(objects[model], objects.get(optimizer, optimizer), max_grad_norm=norm)
        self.expected.rejected += rejected

    @rule(label=st.sampled_from(sorted(FLUSHES)))
    def flush(self, label: str) -> None:
        rejected, args = FLUSHES[label]
        self.rec.flush(*args)
        self.expected.rejected += rejected

    def teardown(self) -> None:
        try:
            if self.rec is not None:
                self.finish_and_check()
        finally:
            self.tmp.cleanup()

    def finish_and_check(self) -> None:
        rec, expected = self.rec, self.expected
        rec.step(math.nan, step=0)  # a capture (when switched on) still arrives after all of the above
        expected.step("nan", 0)
        rec.event("final", "after everything", data={"ok": 1})
        expected.events["final"] += 1
        ending = self.final_status
        if ending == "exit-error":
            rec.__exit__(ValueError, ValueError("boom"), None)
        elif ending == "exit":
            rec.__exit__(None, None, None)
        else:
            rec.close(*(() if ending is None else (ending,)))
        expected.rejected += ending in ("bogus", 5)
        rec.close()  # twice: a no-op
        run_dir = rec.run_dir
        rows = Counter(name for path in sorted((run_dir / "metrics").glob("*.parquet")) for name in pq.read_table(path).column("metric").to_pylist())
        events = [e for path in sorted((run_dir / "events").glob("*.parquet")) for e in pq.read_table(path).to_pylist()]
        manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        assert {name: n for name, n in rows.items() if name.startswith("u/")} == dict(expected.rows)
        assert rows["train/loss"] == expected.losses
        kinds = Counter(e["kind"] for e in events)
        assert {k: kinds[k] for k in expected.events} == dict(expected.events)
        assert sum(kinds[k] for k in kinds if k.startswith("user")) == sum(n for k, n in expected.events.items() if k.startswith("user"))
        assert kinds["text"] == expected.texts
        assert kinds[EVENT_CAPTURE] == expected.captures
        assert all(json.loads(e["data"]) is not None for e in events)  # every event's data is JSON
        stats = manifest["stats"]
        assert (stats["errors"], stats["lost_rows"], stats["dropped_rows"]) == (0, 0, 0), [e["message"] for e in events if e["kind"] == "recorder_error"]
        assert stats["rejected_values"] == expected.rejected
        assert manifest["status"] == ("failed" if ending in ("failed", "exit-error") else "finished")

    @rule(status=st.sampled_from([None, "finished", "failed", "bogus", 5, "exit", "exit-error"]))
    def choose_ending(self, status: Any) -> None:
        self.final_status = status

    final_status: Any = None


@st.composite
def configs(draw: st.DrawFn) -> tuple[Any, int]:
    """A config factory (fresh objects each time) and the parts of it that cannot be stored as they are."""
    shape = draw(st.sampled_from(["pieces", "pieces", "none", "list", "namespace", "self"]))
    if shape == "none":
        return (lambda: None), 0
    if shape == "list":
        return (lambda: [1, 2]), 1
    if shape == "namespace":
        return (lambda: argparse.Namespace(lr=0.1, layers=[1, 2])), 0
    if shape == "self":
        return cyclic_dict, 1
    names = draw(st.lists(st.sampled_from(sorted(CONFIG_PIECES)), unique=True, max_size=6))
    both_ones = draw(st.booleans())

    def build() -> dict[Any, Any]:
        config: dict[Any, Any] = {name: CONFIG_PIECES[name][1]() for name in names}
        if both_ones:
            config |= {1: "int key", "1": "str key"}
        return config

    return build, sum(CONFIG_PIECES[name][0] for name in names)


RecorderMachine.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=12, deadline=None,
                                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_public_api_never_raises_and_loses_no_valid_value = RecorderMachine.TestCase
