"""Explicit steps: ``rec.log(..., step=N)`` beyond the training never makes a run look further trained.

Hypothesis draws sequences of ``rec.step()`` (with or without a loss, an explicit step or
not), ``rec.log()`` (at an explicit step or the implicit one) and ``rec.flush()`` calls. At
every flush and at the end, ``run.json``'s ``last_step``/``last_logged_step``, ``tuidiag ls``,
``tuidiag status``, the overview row and ``tuidiag diagnose``'s heading must say the same
step, that step must be the highest step ``rec.step()`` returned (or, in a run that never
called it, the highest step logged), and the logged extent must be labelled, never a step count.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tuidiag.cli.ls_cmd import runs_table
from tuidiag.cli.main import main
from tuidiag.cli.status_cmd import status_line
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.viewmodel.snapshot import summarize

EXAMPLES = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
STEP_TEXT = re.compile(r"^(-|[\d,]+)(?: \(logged to ([\d,]+)\))?$")

OPS = st.lists(st.one_of(
    st.tuples(st.just("step"), st.one_of(st.none(), st.floats(0.1, 5)), st.one_of(st.none(), st.integers(0, 30))),
    st.tuples(st.just("log"), st.one_of(st.none(), st.integers(0, 40))),
    st.tuples(st.just("flush")),
), min_size=1, max_size=6)


def _number(text: str | None) -> int | None:
    return None if text in (None, "-") else int(text.replace(",", ""))


def _shown(run_dir: Path, capsys) -> dict[str, str]:
    """The step text of each place that shows one, for the run as it is on disk now."""
    run = open_run(run_dir)
    table = runs_table([run], run_dir.parent)
    ls_cell = str(table.columns[2]._cells[0])
    manifest = json.loads((run_dir / "run.json").read_text())
    status = re.search(r"step (.*?)(?: loss | ▸ )", status_line(run_dir, manifest, None)).group(1)
    overview = summarize(run, diagnose(run)).step_text()
    capsys.readouterr()
    assert main(["diagnose", str(run_dir)]) == 0
    heading = re.search(r"at step (.*) \(\w+\)$", capsys.readouterr().out.splitlines()[0]).group(1)
    return {"ls": ls_cell, "status": status, "overview": overview, "diagnose": heading}


def _check(run_dir: Path, trained: int | None, capsys) -> None:
    manifest = json.loads((run_dir / "run.json").read_text())
    extent = open_run(run_dir).last_step  # the highest step of the rows on disk
    assert manifest["last_logged_step"] == extent
    expected_step = trained if trained is not None else extent
    assert manifest["last_step"] == expected_step
    shown = _shown(run_dir, capsys)
    assert len(set(shown.values())) == 1, shown  # every place says the same
    match = STEP_TEXT.match(shown["ls"])
    assert match, shown
    step, logged_to = _number(match.group(1)), _number(match.group(2))
    assert step == expected_step  # never more than step() recorded
    assert logged_to == (extent if extent is not None and expected_step is not None and extent > expected_step else None)


@EXAMPLES
@given(ops=OPS)
def test_every_place_shows_the_training_step_and_labels_the_logged_extent(tmp_path_factory, capsys, ops) -> None:
    run_dir = tmp_path_factory.mktemp("steps") / "r"
    trained: int | None = None
    with tuidiag.Recorder(run_dir, flush_interval=60) as rec:
        for op in ops:
            if op[0] == "step":
                s = rec.step(op[1], step=op[2])
                trained = s if trained is None else max(trained, s)
            elif op[0] == "log":
                rec.log({"val/loss": 0.5, "eval": {"acc": 0.9}}, step=op[1])
            else:
                rec.flush()
                if (run_dir / "run.json").exists() and open_run(run_dir).last_step is not None:
                    _check(run_dir, trained, capsys)
    assert rec.errors.count == 0 and rec.rejected_values == 0
    if open_run(run_dir).last_step is not None or trained is not None:
        _check(run_dir, trained, capsys)


def test_three_steps_and_a_log_at_step_11(tmp_path: Path, capsys) -> None:
    """The issue's example: ls says step 2, logged to 11; nothing says 12 steps or step 11 trained."""
    with tuidiag.Recorder(tmp_path / "r") as rec:
        for i in range(3):
            rec.step(1.0 / (i + 1))
        rec.log({"val/loss": 0.4}, step=11)
    assert _shown(tmp_path / "r", capsys) == dict.fromkeys(("ls", "status", "overview", "diagnose"), "2 (logged to 11)")
    manifest = json.loads((tmp_path / "r" / "run.json").read_text())
    assert (manifest["last_step"], manifest["last_logged_step"]) == (2, 11)
    assert main(["ls", str(tmp_path)]) == 0
    assert "12" not in capsys.readouterr().out


def test_a_resumed_run_counts_on_past_the_logged_steps_and_keeps_them(tmp_path: Path) -> None:
    """A session resumed after values logged at step 11 starts at 12: the step-11 value is not replaced."""
    with tuidiag.Recorder(tmp_path / "r") as rec:
        for i in range(3):
            rec.step(1.0)
        rec.log({"val/loss": 0.4}, step=11)
    with tuidiag.Recorder(tmp_path / "r", resume="allow") as rec:
        assert rec.step(0.5) == 12
    run = open_run(tmp_path / "r")
    assert list(run.series("val/loss").steps) == [11] and list(run.series("train/loss").steps) == [0, 1, 2, 12]
    manifest = json.loads((tmp_path / "r" / "run.json").read_text())
    assert (manifest["last_step"], manifest["last_logged_step"]) == (12, 12)


@pytest.mark.parametrize("calls, expected", [
    ([("log", 5), ("log", 9)], "9"),  # SummaryWriter-style: no rec.step(), the logged steps are the progress
    ([("step", None), ("log", 4)], "0 (logged to 4)"),  # one step with nothing to record still counts
    ([("step", 1.0), ("step", 1.0), ("log", 0)], "1"),  # a log at an earlier step extends nothing
])
def test_runs_with_few_or_no_training_steps(tmp_path: Path, capsys, calls, expected: str) -> None:
    with tuidiag.Recorder(tmp_path / "r") as rec:
        for kind, value in calls:
            rec.step(value) if kind == "step" else rec.log({"m": 1.0}, step=value)
    assert set(_shown(tmp_path / "r", capsys).values()) == {expected}
