"""Re-running into a run directory: ``Recorder(dir, resume="never" | "allow" | "must")``.

A matrix over the modes and what the directory holds checks which directory is
written, the step numbering, the rows per step and the events; a property test
checks which rows the reader returns after resumes that overlap earlier steps;
subprocesses run the same script twice; ranks other than 0 follow rank 0; the
run view marks the resume on its charts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tests.app_helpers import fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.format import EVENT_RESUMED
from tuidiag.recorder import placement
from tuidiag.store.manifest import read_manifest, write_manifest

PREVIOUS_STEPS = 40
NEW_STEPS = 10


def _record(path: Path, steps: int, loss: float, **kwargs: object) -> tuidiag.Recorder:
    with tuidiag.Recorder(path, flush_interval=3600, **kwargs) as rec:
        for _ in range(steps):
            rec.step(loss)
    return rec


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _absent(x: Path) -> None:
    pass


def _empty(x: Path) -> None:
    x.mkdir()


def _unrelated(x: Path) -> None:
    (x / "notes").mkdir(parents=True)
    (x / "notes" / "todo.txt").write_text("keep me")
    (x / "metrics").mkdir()  # an empty metrics folder holds no run either


def _a_file(x: Path) -> None:
    x.write_text("not a directory")


def _finished(x: Path) -> None:
    _record(x, PREVIOUS_STEPS, 1.0, config={"lr": 0.1})


def _crashed(x: Path) -> None:
    _finished(x)
    manifest = read_manifest(x)
    manifest.update(status="running", ended=None, pid=_dead_pid(), host=socket.gethostname())
    write_manifest(x, manifest)


def _with_siblings(x: Path) -> None:
    _finished(x)
    for n in (1, 3):
        _record(x.parent / f"x-{n}", 5, 9.0)


STATES: dict[str, Callable[[Path], None]] = {
    "absent": _absent, "empty": _empty, "unrelated": _unrelated, "a file": _a_file,
    "finished": _finished, "crashed": _crashed, "siblings": _with_siblings,
}
HOLDS_RUN = {"finished", "crashed", "siblings"}


def _expected_dir(mode: str, state: str) -> str | None:
    """The directory name a recorder must write to; ``None``: it must raise ResumeError."""
    if state in HOLDS_RUN:
        if mode == "never":
            return "x-4" if state == "siblings" else "x-1"
        return "x"
    if state == "a file":
        return None if mode == "must" else "x-1"
    return None if mode == "must" else "x"


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize("mode", ["never", "allow", "must"])
def test_which_directory_steps_rows_and_events(tmp_path: Path, mode: str, state: str, capfd: pytest.CaptureFixture[str]) -> None:
    x = tmp_path / "x"
    STATES[state](x)
    before = {p.name: sorted(q.name for q in p.rglob("*")) if p.is_dir() else None for p in tmp_path.iterdir()}
    capfd.readouterr()
    expected = _expected_dir(mode, state)
    if expected is None:
        with pytest.raises(tuidiag.ResumeError, match="resume='must'"):
            tuidiag.Recorder(x, resume=mode)
        after = {p.name: sorted(q.name for q in p.rglob("*")) if p.is_dir() else None for p in tmp_path.iterdir()}
        assert after == before  # nothing created, nothing touched
        return
    rec = _record(x, NEW_STEPS, 2.0, resume=mode, config={"lr": 0.01})
    assert rec.run_dir == tmp_path / expected
    notes = [line for line in capfd.readouterr().err.splitlines() if "recording this training into" in line]
    assert len(notes) == (expected != "x")  # said once, only when the directory is not the one asked for
    if notes:
        assert str(tmp_path / expected) in notes[0]
    run = tuidiag.open_run(rec.run_dir)
    loss = run.series("train/loss")
    continued = state in HOLDS_RUN and mode != "never"
    first = PREVIOUS_STEPS if continued else 0
    assert loss.steps.tolist() == list(range(0 if continued else first, first + NEW_STEPS))
    assert loss.values.tolist() == [1.0] * (first if continued else 0) + [2.0] * NEW_STEPS  # one row per step
    resumed = run.resumes
    if continued:
        assert [e.step for e in resumed] == [PREVIOUS_STEPS] and run.resume_steps == [PREVIOUS_STEPS]
        data = resumed[0].data
        assert data["from_step"] == PREVIOUS_STEPS and data["previous_last_step"] == PREVIOUS_STEPS - 1
        assert data["previous_status"] == ("crashed" if state == "crashed" else "finished")
        assert data["config_changes"] == {"lr": {"old": 0.1, "new": 0.01}} and data["resume"] == mode
        assert run.manifest["resumed"] == 1 and run.manifest["config"] == {"lr": 0.01}
    else:
        assert resumed == [] and "resumed" not in run.manifest and run.manifest["config"] == {"lr": 0.01}
    assert run.manifest["last_step"] == first + NEW_STEPS - 1 and run.status == "finished"
    if state in HOLDS_RUN and mode == "never":  # the earlier run is untouched
        old = tuidiag.open_run(x)
        assert old.series("train/loss").steps.tolist() == list(range(PREVIOUS_STEPS)) and old.resumes == []
    if state == "unrelated":
        assert (x / "notes" / "todo.txt").read_text() == "keep me"


@pytest.mark.parametrize("mode", ["allow", "must"])
def test_a_run_another_process_is_writing_is_never_joined(tmp_path: Path, mode: str, capfd: pytest.CaptureFixture[str]) -> None:
    x = tmp_path / "x"
    live = tuidiag.Recorder(x, flush_interval=3600)
    live.step(1.0)
    try:
        if mode == "must":
            with pytest.raises(tuidiag.ResumeError, match="still being written"):
                tuidiag.Recorder(x, resume=mode)
            assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]
            return
        rec = _record(x, 3, 2.0, resume=mode)
        assert rec.run_dir == tmp_path / "x-1"
        assert "x is still being written by another process" in capfd.readouterr().err.replace(str(tmp_path) + "/", "")
    finally:
        live.close()
    assert tuidiag.open_run(x).series("train/loss").steps.tolist() == [0]


@pytest.mark.parametrize("mode", ["allow", "must"])
@pytest.mark.parametrize("other_host", ["goes stale", "beats again", "stays fresh"])
def test_a_run_from_another_host_is_waited_on_until_it_is_stale_or_beats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        mode: str, other_host: str) -> None:
    monkeypatch.setattr(placement, "STALE_WAIT", 1.0)
    monkeypatch.setattr(placement, "STALE_POLL", 0.05)
    x = tmp_path / "x"
    _finished(x)
    manifest = read_manifest(x)
    age = 29.7 if other_host == "goes stale" else 5.0  # crashed after 30 s without a beat
    manifest.update(status="running", ended=None, host="another-host", pid=1, heartbeat=time.time() - age, flush_interval=1.0)
    write_manifest(x, manifest)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.05):
            write_manifest(x, dict(manifest, heartbeat=time.time()))

    beating = threading.Thread(target=beat)
    if other_host == "beats again":
        beating.start()
    try:
        if other_host != "goes stale" and mode == "must":
            with pytest.raises(tuidiag.ResumeError, match="still being written"):
                tuidiag.Recorder(x, resume=mode)
            return
        rec = _record(x, 2, 2.0, resume=mode)
    finally:
        stop.set()
        if beating.is_alive():
            beating.join()
    if other_host == "goes stale":
        assert rec.run_dir == x and tuidiag.open_run(x).resumes[0].data["previous_status"] == "crashed"
    else:
        assert rec.run_dir == tmp_path / "x-1"


def test_an_unknown_mode_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="resume must be one of"):
        tuidiag.Recorder(tmp_path / "x", resume="yes")
    assert not (tmp_path / "x").exists()


def test_config_is_merged_and_every_changed_key_is_in_the_event(tmp_path: Path) -> None:
    x = tmp_path / "x"
    _record(x, 3, 1.0, config={"lr": 0.1, "opt": {"name": "sgd", "momentum": 0.9}, "batch": 32, "tag": "a"})
    _record(x, 3, 1.0, resume="allow", config={"lr": 0.01, "opt": {"name": "sgd", "momentum": 0.95}, "seed": 1, "tag": "a"})
    run = tuidiag.open_run(x)
    assert run.manifest["config"] == {"lr": 0.01, "opt": {"name": "sgd", "momentum": 0.95}, "batch": 32, "tag": "a", "seed": 1}
    event = run.resumes[0]
    assert event.data["config_changes"] == {
        "lr": {"old": 0.1, "new": 0.01}, "opt/momentum": {"old": 0.9, "new": 0.95}, "seed": {"new": 1},
    }
    assert "lr 0.1 -> 0.01" in event.message and "seed = 1 (new)" in event.message


def test_log_and_event_before_the_first_step_of_a_resumed_session_land_at_its_start(tmp_path: Path) -> None:
    x = tmp_path / "x"
    _record(x, 5, 1.0)
    with tuidiag.Recorder(x, resume="allow", flush_interval=3600) as rec:
        rec.log({"val/loss": 0.5})  # e.g. an evaluation right after loading the checkpoint
        rec.event("note", "loaded")
        assert rec.step(1.0) == 5
    run = tuidiag.open_run(x)
    assert run.series("val/loss").steps.tolist() == [5]
    assert [e.step for e in run.events if e.kind == "note"] == [5]


Session = tuple[int, list[int]]
"""(start_step, the steps the session records explicitly, in order)."""


def _visible(sessions: list[Session]) -> dict[int, tuple[int, int]]:
    """step -> (session, row index within it) the reader must return: a later session replaces
    earlier rows from its start step on and wherever it records a step again."""
    kept: dict[int, tuple[int, int]] = {}
    for k, (start, steps) in enumerate(sessions):
        kept = {s: v for s, v in kept.items() if s < start}
        for i, s in enumerate(steps):
            kept[s] = (k, i)
    return kept


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 30), st.lists(st.integers(0, 40), min_size=1, max_size=12, unique=True)),
                min_size=1, max_size=3))
def test_after_resumes_each_step_has_the_rows_of_the_last_session_that_wrote_it(tmp_path_factory: pytest.TempPathFactory,
                                                                                sessions: list[Session]) -> None:
    x = tmp_path_factory.mktemp("resumes") / "x"
    for k, (start, steps) in enumerate(sessions):
        with tuidiag.Recorder(x, resume="allow", start_step=start, flush_interval=3600) as rec:
            for i, s in enumerate(steps):
                rec.log({"m": 1000.0 * k + i}, step=s)
    run = tuidiag.open_run(x)
    expected = _visible(sessions)
    series = run.series("m")
    assert series.steps.tolist() == sorted(expected)  # each step exactly once
    assert series.values.tolist() == [1000.0 * expected[s][0] + expected[s][1] for s in sorted(expected)]
    assert run.last_step == max(expected)
    assert len(run.resumes) == len(sessions) - 1
    table = run.to_pandas()
    assert len(table[~table.metric.str.startswith("sys/")]) == len(expected)  # sys/ rows are the recorder's own samples


def test_rows_sharing_a_step_within_one_session_are_all_kept_in_write_order(tmp_path: Path) -> None:
    x = tmp_path / "x"
    with tuidiag.Recorder(x, flush_interval=3600) as rec:
        for value in (1.0, 2.0, 3.0):
            rec.log({"m": value}, step=7)
    _record(x, 2, 1.0, resume="allow")  # a resume elsewhere leaves them alone
    assert tuidiag.open_run(x).series("m").values.tolist() == [1.0, 2.0, 3.0]


SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None  # torch-free: starts fast
    import tuidiag
    rec = tuidiag.Recorder(sys.argv[1], resume=sys.argv[2], config={"lr": float(sys.argv[3])}, flush_interval=0.05)
    for step in range(40):
        rec.step(1.0 / (step + 1))
    rec.close()
    print(rec.run_dir)
    """
)


def test_running_the_same_script_twice_never_mixes_two_trainings(tmp_path: Path, python: str) -> None:
    x = tmp_path / "runs" / "x"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))

    def run(mode: str, lr: float) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([python, "-c", SCRIPT, str(x), mode, str(lr)], env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return result

    first, second = run("never", 0.1), run("never", 0.2)
    assert first.stdout.strip() == str(x) and "recording" not in first.stderr
    assert second.stdout.strip() == str(x.parent / "x-1")
    assert second.stderr.count("recording this training into") == 1
    for path, lr in ((x, 0.1), (x.parent / "x-1", 0.2)):
        run_ = tuidiag.open_run(path)
        assert run_.series("train/loss").steps.tolist() == list(range(40)) and run_.manifest["config"] == {"lr": lr}
        assert run_.resumes == [] and diagnose(run_).run == path.name
    third = run("allow", 0.05)
    assert third.stdout.strip() == str(x)
    continued = tuidiag.open_run(x)
    assert continued.series("train/loss").steps.tolist() == list(range(80))
    assert [(e.step, e.data["config_changes"]) for e in continued.resumes] == [(40, {"lr": {"old": 0.1, "new": 0.05}})]
    assert sorted(p.name for p in x.parent.iterdir()) == ["x", "x-1"]


def _as_rank(monkeypatch: pytest.MonkeyPatch, rank: int) -> None:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29999")


@pytest.mark.parametrize("mode, state, expected", [("never", "absent", "x"), ("never", "finished", "x-1"),
                                                  ("allow", "finished", "x"), ("never", "siblings", "x-4")])
def test_rank_one_records_where_rank_zero_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, state: str,
                                               expected: str) -> None:
    x = tmp_path / "x"
    STATES[state](x)
    _as_rank(monkeypatch, 0)
    zero = tuidiag.Recorder(x, resume=mode, flush_interval=3600, control=False)
    _as_rank(monkeypatch, 1)
    one = tuidiag.Recorder(x, resume=mode, flush_interval=3600, control=False)
    assert zero.run_dir == one.run_dir == tmp_path / expected
    for rec in (zero, one):
        rec.step(1.0)
    zero.close()
    one.close()
    run = tuidiag.open_run(tmp_path / expected)
    start = PREVIOUS_STEPS if expected == "x" and state == "finished" else 0
    assert run.ranks == [0, 1] and [run.series("train/loss", rank=r).steps[-1] for r in (0, 1)] == [start, start]
    assert len(run.resumes) == (1 if start else 0)  # one event per resume, from rank 0


def test_rank_one_without_a_rank_zero_records_into_the_directory_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                              capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(placement, "FOLLOW_TIMEOUT", 0.3)
    _as_rank(monkeypatch, 1)
    with tuidiag.Recorder(tmp_path / "x", flush_interval=3600) as rec:
        rec.step(1.0)
    assert rec.run_dir == tmp_path / "x"
    assert "no run started by rank 0 of this launch" in capfd.readouterr().err
    assert tuidiag.open_run(tmp_path / "x").series("train/loss", rank=1).steps.tolist() == [0]


def test_recorders_started_at_once_get_different_directories(tmp_path: Path) -> None:
    x = tmp_path / "x"
    gate = threading.Barrier(6)
    recorders: list[tuidiag.Recorder] = []

    def start() -> None:
        gate.wait()
        recorders.append(tuidiag.Recorder(x, flush_interval=3600, control=False))

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for rec in recorders:
        rec.step(1.0)
        rec.close()
    names = sorted(r.run_dir.name for r in recorders)
    assert len(set(names)) == 6 and all(placement.suffix_of(x, r.run_dir) or r.run_dir == x for r in recorders)
    for rec in recorders:
        run = tuidiag.open_run(rec.run_dir)
        assert run.status == "finished" and run.series("train/loss").steps.tolist() == [0]
        assert json.loads((rec.run_dir / "run.json").read_text())["run_id"] not in {
            json.loads((o.run_dir / "run.json").read_text())["run_id"] for o in recorders if o is not rec}


def _spiky_after(resume_at: int | None, steps: int = 400, seed: int = 0) -> list[float]:
    """A decaying noisy loss; a 4x jump for 5 steps at ``resume_at`` (a restart's transient)."""
    rng = np.random.default_rng(seed)
    loss = 2.0 * np.exp(-np.arange(steps) / 150) + 0.2
    loss *= np.exp(rng.normal(0, 0.02, steps))
    if resume_at is not None:
        loss[resume_at : resume_at + 5] *= 4
    return loss.tolist()


@pytest.mark.parametrize("resume_at", [150, 250, 330])
def test_the_transient_after_a_resume_is_not_read_as_loss_spikes(tmp_path: Path, resume_at: int) -> None:
    loss = _spiky_after(resume_at)
    without, with_resume = tmp_path / "one-session", tmp_path / "resumed"
    with tuidiag.Recorder(without, flush_interval=3600) as rec:
        for value in loss:
            rec.step(value)
    with tuidiag.Recorder(with_resume, flush_interval=3600) as rec:
        for value in loss[:resume_at]:
            rec.step(value)
    with tuidiag.Recorder(with_resume, resume="allow", flush_interval=3600) as rec:
        for value in loss[resume_at:]:
            rec.step(value)
    codes = {f.code for f in diagnose(open_run(without)).findings}
    assert "loss_spikes" in codes  # the same curve in one session: spikes that recovered
    resumed = diagnose(open_run(with_resume))
    assert tuidiag.open_run(with_resume).resume_steps == [resume_at]
    assert "loss_spikes" not in {f.code for f in resumed.findings}


async def test_the_run_view_marks_the_resume_on_every_chart(tmp_path: Path) -> None:
    x = tmp_path / "runs" / "x"
    _record(x, 60, 1.0)
    _record(x, 30, 0.5, resume="allow")
    app = TuidiagApp(tmp_path / "runs", clock=fixed_clock)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 1)
        await pilot.press("enter")
        assert isinstance(app.screen, RunScreen)
        assert await wait_for(pilot, lambda: app.screen.detail is not None)
        assert {name: chart.resumes for name, chart in app.screen.detail.charts.items()} == dict.fromkeys(app.screen.detail.charts, (60,))
        widget = app.screen.query_one("#chart-loss", MetricChart)
        assert await wait_for(pilot, lambda: widget.chart is not None)
        assert "resumed at blue line" in str(widget.render())
