"""The monitor's job flow through Pilot: key, confirmation showing the command, a real job process, result tab."""

from __future__ import annotations

from textual.widgets import Static

from tests.app_helpers import drawn_text, wait_for
from tests.conftest import ROOT
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.job_bar import JobBar


def _record(tmp_path, monkeypatch, factory: str):
    monkeypatch.chdir(ROOT / "tests")  # where the factory module lives, as a training's cwd would be
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    import jobs_factory

    run = tmp_path / "run"
    jobs_factory.record(run, factory)
    return run


async def test_nan_hunt_from_the_monitor(tmp_path, monkeypatch) -> None:
    run = _record(tmp_path, monkeypatch, "jobs_factory:nan_log0")
    app = TuidiagApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await pilot.press("n")
        assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))  # the manifest is read in a worker
        assert "nan-hunt" in app.screen.command and "jobs_factory:nan_log0" in app.screen.factory
        await pilot.press("y")
        bar = app.screen.query_one(JobBar)  # a factory job runs in a process: the bar says so until it ends
        assert bar.display and "starting the job process" in str(bar.query_one("#job-figures", Static).render())
        assert await wait_for(pilot, lambda: any(job == "nan_hunt" for job, _ in app.screen.detail.jobs), timeout=120), (
            [n.message for n in app._notifications], str(bar.query_one("#job-figures", Static).render()),
            sorted(p.name for p in (run / "jobs").glob("*")) if (run / "jobs").exists() else None)
        assert await wait_for(pilot, lambda: app.job is None and not bar.display)
        assert any("the NaN hunt finished: found the op of the forward pass" in n.message for n in app._notifications)
        await pilot.press("7")
        text = drawn_text(app.screen.query_one("#jobs-text", Static))
        assert "log" in text and "NaN hunt" in text


async def test_declining_the_confirmation_runs_nothing(tmp_path, monkeypatch) -> None:
    run = _record(tmp_path, monkeypatch, "jobs_factory:healthy")
    app = TuidiagApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))  # the manifest is read in a worker
        await pilot.press("escape")
        assert isinstance(app.screen, RunScreen) and app.job is None
        assert not (run / "jobs").exists()


async def test_a_run_without_factory_is_refused(tmp_path) -> None:
    import tuidiag

    with tuidiag.Recorder(tmp_path / "plain") as rec:
        rec.step(1.0)
    app = TuidiagApp(tmp_path / "plain")
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await pilot.press("l")
        await pilot.pause(0.2)
        assert isinstance(app.screen, RunScreen) and app.job is None


async def test_lr_finder_on_a_live_training_from_the_monitor(tmp_path) -> None:
    """The live training runs in a thread of this process (no interpreter or torch to start): the monitor
    sends the job through the run's control directory either way."""
    from helpers import training_thread

    run = tmp_path / "live"
    with training_thread(run, pause=0.05):  # 20 steps/s: jobs run at the next step; fewer idle steps to pay for
        app = TuidiagApp(run)
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=60)
            await pilot.press("l")
            assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))  # the manifest is read in a worker
            assert app.screen.live is not None and "live training process" in app.screen.live
            await pilot.press("y")
            assert await wait_for(pilot, lambda: any(job == "lr_find" for job, _ in app.screen.detail.jobs), timeout=120)
            await pilot.press("7")
            text = drawn_text(app.screen.query_one("#jobs-text", Static))
            assert "suggested" in text
    assert (run / "jobs").is_dir() and any((run / "jobs").glob("lr_find-*.json"))


async def test_live_action_from_the_monitor_scales_the_lr(tmp_path) -> None:
    from helpers import training_thread

    from tuidiag.app.screens.live_action import LiveActionScreen
    from tuidiag.store import open_run

    run = tmp_path / "live"
    with training_thread(run, pause=0.05):  # 20 steps/s: jobs run at the next step; fewer idle steps to pay for
        app = TuidiagApp(run)
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=60)
            await pilot.press("a")
            assert await wait_for(pilot, lambda: isinstance(app.screen, LiveActionScreen), timeout=60)
            assert app.screen.proposals[0].action == "scale_lr"
            factor = app.screen.proposals[0].args["factor"]
            await pilot.press("1")
            assert await wait_for(pilot, lambda: any(e.kind == "action" for e in open_run(run).events), timeout=120)
    event = next(e for e in open_run(run).events if e.kind == "action")
    assert f"LR x{factor:g}" in event.message


async def test_a_job_that_fails_says_why_on_the_jobs_tab_after_its_notification(tmp_path, monkeypatch) -> None:
    """A factory that returns no optimizer: the job process fails; the notification goes after a few seconds, the Jobs
    tab keeps the reason at its top (a review only saw a toast vanish, and the tab still said 'No job results yet')."""
    import json

    run = _record(tmp_path, monkeypatch, "jobs_factory:healthy")
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "factory": "jobs_factory:not_a_factory"}))  # edited since
    app = TuidiagApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await pilot.press("l")
        assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: app.job is None and app.screen.job_failure is not None, timeout=120), (
            [n.message for n in app._notifications])
        await pilot.press("7")
        text = drawn_text(app.screen.query_one("#jobs-text", Static))
        assert text.startswith("Last job: the LR finder failed") and "returned no optimizer" in text, text
        app.clear_notifications()  # the toast is gone; the tab still says it
        await pilot.pause()
        assert "returned no optimizer" in drawn_text(app.screen.query_one("#jobs-text", Static))
