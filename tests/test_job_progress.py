"""Visible job progress: the bar's figures (steps, elapsed, time left, the cancel key) for any pace and state,
an armed NaN hunt in a live training that says how many steps are left and is cancelled with its key, and a
Jobs tab that never reads "step -"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import training_thread
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.widgets import Static

from tests.conftest import examples
from tests.app_helpers import wait_for
from tuidiag import job_kinds
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.run_screen import CANCEL_KEY, RunScreen
from tuidiag.app.widgets.job_bar import JobBar
from tuidiag.store.job_results import save_result
from tuidiag.viewmodel.job_progress import ARMED, RUNNING, JobTracker, duration, outcome
from tuidiag.viewmodel.jobs_view import job_texts


@settings(max_examples=examples(60), deadline=None)
@given(total=st.integers(1, 5000), pace=st.floats(0.001, 5.0), reports=st.lists(st.integers(1, 5000), min_size=1, max_size=6),
       start_delay=st.floats(0.0, 30.0))
def test_a_running_job_shows_done_of_total_elapsed_and_the_time_left_at_its_pace(total: int, pace: float, reports: list[int],
                                                                                 start_delay: float) -> None:
    """Statuses at a constant pace: the bar shows the last done/total, the time since the monitor started it,
    and the time left at the pace measured since the job began running."""
    tracker = JobTracker("run", "lr_find", started=0.0, live=True)
    begun = start_delay
    tracker.update({"state": "running", "done": 0, "total": total}, begun)
    done = 0
    for report in sorted(min(r, total) for r in reports):
        done = report
        tracker.update({"state": "running", "done": done, "total": total}, begun + done * pace)
    now = begun + done * pace
    view = tracker.view(now)
    figures = view.figures(CANCEL_KEY)
    assert figures.startswith(f"{done}/{total}  {duration(now)} elapsed") and figures.endswith(f"{CANCEL_KEY} cancels")
    assert view.determinate and view.left == pytest.approx(pace * (total - done), rel=1e-6, abs=1e-9)
    assert f"~{duration(view.left)} left" in figures


@settings(max_examples=examples(40), deadline=None)
@given(window=st.integers(1, 1000), waited=st.integers(0, 1000), rate=st.one_of(st.none(), st.floats(0.5, 500.0)))
def test_an_armed_hunt_says_how_many_steps_are_left_and_how_to_cancel(window: int, waited: int, rate: float | None) -> None:
    waited = min(waited, window)
    tracker = JobTracker("run", "nan_hunt", started=0.0, live=True)
    tracker.update({"state": "armed", "done": waited, "total": window, "message": "armed: waiting"}, 2.0)
    view = tracker.view(7.0, rate)
    figures = view.figures(CANCEL_KEY)
    assert view.state == ARMED and figures.startswith(f"armed: {window - waited} steps left  7 s elapsed")
    assert figures.endswith(f"{CANCEL_KEY} cancels")
    assert (view.left is not None) == (rate is not None or waited == window)
    if rate is not None:
        assert view.left == pytest.approx((window - waited) / rate)


@pytest.mark.parametrize("seconds,text", [(None, "-"), (0.4, "0 s"), (59.4, "59 s"), (61, "1 min 01 s"), (3725, "1 h 02 min")])
def test_durations_read_at_a_glance(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize("kind", job_kinds.kinds(), ids=lambda k: k.name)
def test_every_verdict_becomes_the_notification_when_a_job_ends(kind: job_kinds.JobKind) -> None:
    for code, verdict in kind.verdicts.items():
        severity, text = outcome(kind.name, "done", "", {"verdict": code, "passed": code == "pass",
                                                         "suggested_lr": 1e-3 if code != "no_suggestion" else None,
                                                         "reliable": code == "suggested",
                                                         "informative": code not in ("uninformative", "diverged"),
                                                         "diverged": "the model had diverged" if code == "diverged" else None})
        assert text.startswith(f"{kind.title} finished: {verdict.text}") and severity == ("warning" if verdict.negative else "information")
    assert outcome(kind.name, "cancelled", "", None) == ("warning", f"{kind.title} cancelled")
    assert outcome(kind.name, "failed", "boom", None) == ("error", f"{kind.title} failed: boom")


@pytest.mark.parametrize("result", [
    {"verdict": "no_nonfinite", "summary": "armed for 200 steps (5-204): no non-finite loss or gradient appeared",
     "armed_steps": [5, 204]},
    {"verdict": "no_capture", "summary": "no NaN capture in run/captures", "how_to_capture": "record it"},
    {"verdict": "forward", "summary": "forward pass: exp made inf", "step": 12, "module": "0", "op": "exp"},
], ids=lambda r: r["verdict"])
def test_the_jobs_tab_never_reads_step_dash(tmp_path: Path, result: dict) -> None:
    save_result(tmp_path, "nan_hunt", result, step=7)
    ((job, text),) = job_texts(tmp_path)
    assert job == "nan_hunt" and "step -" not in text and result["summary"] in text
    assert ("NaN hunt at step 12" in text) == ("step" in result)


async def test_an_armed_nan_hunt_shows_its_steps_left_and_is_cancelled_with_its_key(tmp_path: Path) -> None:
    """n then y on a healthy live run: the hunt arms in the training, the bar says so, and the cancel key ends it."""
    run = tmp_path / "live"
    with training_thread(run, pause=0.03):  # 200 armed steps last several seconds: the cancel comes first
        app = TuidiagApp(run)
        async with app.run_test(size=(80, 24)) as pilot:
            assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=60)
            await pilot.press("n")
            assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))
            await pilot.press("y")
            bar = app.screen.query_one(JobBar)
            assert await wait_for(pilot, lambda: bar.view is not None and bar.view.state == ARMED, timeout=30)
            figures = str(bar.query_one("#job-figures", Static).render())
            assert re.match(rf"armed: \d+ steps left  \d+ s elapsed .*{CANCEL_KEY} cancels$", figures), figures
            assert int(figures.split()[1]) == bar.view.total - bar.view.done <= 200
            await pilot.press("o")  # one job at a time: the armed hunt holds the slot, and says how to free it
            assert any(f"the NaN hunt is already running ({CANCEL_KEY} cancels it)" in n.message for n in app._notifications)
            await pilot.press(CANCEL_KEY)
            assert await wait_for(pilot, lambda: app.job is None, timeout=30)
            assert not bar.display
            assert any("the NaN hunt cancelled" in n.message for n in app._notifications)


def test_states_before_and_between_progress_say_what_happens() -> None:
    tracker = JobTracker("run", "overfit_batch", started=0.0, live=False)
    assert tracker.view(3.0).figures("x") == "starting the job process  3 s elapsed  x cancels"
    tracker.update({"state": "running", "done": 0, "total": 0}, 4.0)
    assert tracker.view(5.0).figures("x") == "running  5 s elapsed  x cancels" and not tracker.view(5.0).determinate
    live = JobTracker("run", "lr_find", started=0.0, live=True)
    live.update({"state": "accepted"}, 1.0)
    assert live.view(2.0).figures("x") == "accepted: runs at the next step  2 s elapsed  x cancels"
    assert RUNNING != ARMED


@pytest.mark.parametrize("exit_code,state", [(0, "done"), (1, "done"), (2, "failed"), (-15, "cancelled")])
def test_a_job_process_progress_lines_become_statuses(tmp_path: Path, exit_code: int, state: str) -> None:
    """A real process writing what ``tuidiag <job> --progress-lines`` writes: each progress line is a running
    status, the 'saved' line names the result, and the exit status says how it ended."""
    import subprocess
    import sys

    from tuidiag.app import job_runner

    result = save_result(tmp_path, "sharpness", {"verdict": "flat"}, step=3)
    script = ("import os, signal, sys\n"
              "for done in (1, 2, 3): print(f'progress {done} 3', file=sys.stderr, flush=True)\n"
              f"print('saved {result}', file=sys.stderr)\nprint('boom: the job failed', file=sys.stderr)\n"
              f"code = {exit_code}\n"
              "if code < 0: sys.stderr.flush(); os.kill(os.getpid(), -code)\n"
              "sys.exit(code)\n")
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    seen: list[dict] = []
    returncode, lines = job_runner.follow(process, seen.append)
    assert returncode == exit_code and seen == [{"state": "running", "done": d, "total": 3} for d in (1, 2, 3)]
    status = job_runner.final_status(returncode, lines)
    assert status["state"] == state
    if state == "done":
        assert job_runner.result_of(status) == {"verdict": "flat"}
    if state == "failed":
        assert "boom: the job failed" in status["message"]
