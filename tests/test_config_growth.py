"""A config that grows during the run, TensorBoard-style hparams, and text: stored, shown and queryable.

Generated call sequences (hypothesis) check that ``rec.config`` always equals a plain
dict merge of everything given, that ``run.json`` ends with the same, and that one
``config`` event is recorded per call that changed something.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tuidiag.format import EVENT_CONFIG, EVENT_TEXT, HPARAM_PREFIX

KEYS = st.sampled_from(["lr", "bs", "warmup", "opt", "seed"])
LEAVES = st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(max_size=8), st.booleans())
VALUES = st.one_of(LEAVES, st.dictionaries(st.sampled_from(["name", "beta"]), LEAVES, max_size=2))


def _differs(old: object, new: object) -> bool:
    """Whether a config value changed, as a user means it: another value or another type (nested dicts key by
    key; a key only ``old`` has is kept, so no change). ``-0.0`` and ``0.0`` are one value, as Python says."""
    if isinstance(old, dict) and isinstance(new, dict):
        return any(key not in old or _differs(old[key], value) for key, value in new.items())
    return old != new or type(old) is not type(new)


def _merge(target: dict, new: dict) -> dict:
    out = dict(target)
    for key, value in new.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.dictionaries(KEYS, VALUES, max_size=3), updates=st.lists(st.dictionaries(KEYS, VALUES, max_size=3), max_size=5))
def test_config_is_the_merge_of_every_update(tmp_path_factory: pytest.TempPathFactory, start: dict, updates: list[dict]) -> None:
    run_dir = tmp_path_factory.mktemp("cfg") / "r"
    expected = dict(start)
    changed_calls = 0
    with tuidiag.Recorder(run_dir, config=start, flush_interval=60.0) as rec:
        for i, update in enumerate(updates):
            rec.step(1.0 / (i + 1))
            changes = rec.config.update(update)
            merged = _merge(expected, update)
            assert bool(changes) == _differs(expected, update)
            changed_calls += bool(changes)
            expected = merged
            assert json.loads(json.dumps(dict(rec.config))) == json.loads(json.dumps(expected))
    assert rec.rejected_values == 0 and rec.errors.count == 0
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["config"] == json.loads(json.dumps(expected))
    events = [e for e in tuidiag.open_run(run_dir).events if e.kind == EVENT_CONFIG]
    assert len(events) == changed_calls


def test_update_takes_namespaces_and_keywords_and_says_what_changed(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "r", config={"lr": 0.1}) as rec:
        rec.step(1.0)
        assert rec.config.update(argparse.Namespace(bs=32), lr=0.01) == {"bs": {"new": 32}, "lr": {"old": 0.1, "new": 0.01}}
        assert rec.config.update(lr=0.01) == {}  # unchanged: no change, no event
        assert rec.config["lr"] == 0.01 and len(rec.config) == 2
    (event,) = [e for e in tuidiag.open_run(tmp_path / "r").events if e.kind == EVENT_CONFIG]
    assert event.message == "config: bs = 32 (new); lr 0.1 -> 0.01"


def test_update_never_raises_and_counts_what_it_cannot_store(tmp_path: Path) -> None:
    cycle: dict = {}
    cycle["self"] = cycle
    with tuidiag.Recorder(tmp_path / "r") as rec:
        rec.config.update({"fn": cycle, "ok": 1})
        rec.config.update(12)  # not a mapping: stored under 'value', and said so
    assert rec.errors.count == 0 and rec.rejected_values == 2
    config = json.loads((tmp_path / "r" / "run.json").read_text())["config"]
    assert config["ok"] == 1 and config["value"] == 12 and "fn" in config


def test_log_hparams_keeps_params_and_metrics_and_compare_and_query_show_them(tmp_path: Path) -> None:
    for name, lr, acc in (("a", 0.1, 0.7), ("b", 0.01, 0.9)):
        with tuidiag.Recorder(tmp_path / name, config={"seed": 0}) as rec:
            for i in range(5):
                rec.step(1.0 / (i + 1))
            rec.log_hparams({"lr": lr, "layers": 3}, {"acc": torch.tensor(acc), "final_loss": 0.2, "bad": "x"})
        assert rec.rejected_values == 1  # 'bad' is not a number
        manifest = json.loads((tmp_path / name / "run.json").read_text())
        assert manifest["hparams"]["params"] == {"lr": lr, "layers": 3}
        assert math.isclose(manifest["hparams"]["metrics"]["acc"], acc, rel_tol=1e-6)
        assert manifest["config"] == {"seed": 0, "lr": lr, "layers": 3}
        run = tuidiag.open_run(tmp_path / name)
        assert math.isclose(float(run.series(HPARAM_PREFIX + "acc").values[-1]), acc, rel_tol=1e-6)
    pytest.importorskip("duckdb")
    from tuidiag.store.sql_views import connect

    con = connect(tmp_path)
    rows = con.execute("SELECT run, hparams->'params'->>'lr', CAST(hparams->'metrics'->>'acc' AS DOUBLE) FROM runs ORDER BY run").fetchall()
    assert [(r[0], float(r[1]), round(r[2], 3)) for r in rows] == [("a", 0.1, 0.7), ("b", 0.01, 0.9)]


def test_log_text_is_a_text_event_kept_verbatim(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "r") as rec:
        rec.step(1.0)
        rec.log_text("notes", "lr [red]0.1[/red] \x1b[31m")
        rec.log_text("n", 3)
    texts = [(e.data["key"], e.message) for e in tuidiag.open_run(tmp_path / "r").events if e.kind == EVENT_TEXT]
    assert texts == [("notes", "lr [red]0.1[/red] \x1b[31m"), ("n", "3")]
