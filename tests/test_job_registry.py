"""A job is defined in one place: every side reads the job kinds, and a job added through the registry
alone runs from the CLI (on a factory) and from the monitor (inside a live training), with its progress bar."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import training_thread
from textual.widgets import Static

from tests.app_helpers import drawn_text, wait_for
from tests.conftest import ROOT
from tuidiag import job_kinds
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.run_screen import CANCEL_KEY, RunScreen
from tuidiag.app.widgets.job_bar import JobBar
from tuidiag.cli.main import build_parser, main
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import latest_result


@pytest.fixture
def toy():
    """The toy job registered for one test, its gate closed."""
    import toy_job

    job_kinds.register(toy_job.KIND)
    toy_job.GATE.clear()
    yield toy_job
    toy_job.GATE.set()
    job_kinds.unregister(toy_job.KIND.name)


@pytest.mark.parametrize("kind", job_kinds.kinds(), ids=lambda k: k.name)
def test_every_side_reads_the_job_from_its_kind(kind: job_kinds.JobKind) -> None:
    """The CLI's options and defaults, the monitor's key, the requests a training accepts and the expected
    length all come from the kind; the expected length follows the config's defaults."""
    parser = build_parser(kind.command)
    args = parser.parse_args([kind.command, "RUN"])
    config = kind.config_from_options(vars(args))
    assert config == kind.default_config()
    assert kind.expected_steps() == kind.steps(kind.default_config()) > 0
    bigger = dataclasses.replace(kind.default_config(), **{f.name: 2 * getattr(kind.default_config(), f.name)
                                                           for f in dataclasses.fields(kind.config) if f.name in ("steps", "samples")})
    assert kind.expected_steps(bigger) >= kind.expected_steps()
    assert (kind.name in ctl.requestable()) == kind.live
    bindings = {b.key: b.action for b in RunScreen.BINDINGS}
    assert bindings[kind.key] == f"job('{kind.name}')"
    assert callable(job_kinds.load(kind.renderer)) and set(kind.verdicts) and all(v.text for v in kind.verdicts.values())


def test_sharpness_length_follows_its_config() -> None:
    """The length the confirmation states is computed, not typed: (samples + 1) x batches forward passes."""
    sharpness = job_kinds.get("sharpness")
    config = sharpness.default_config()
    assert sharpness.expected_steps() == (config.samples + 1) * config.batches
    assert sharpness.expected_steps(dataclasses.replace(config, samples=3, batches=2)) == 8


def test_a_kind_may_not_take_another_kinds_command_or_key(toy) -> None:
    with pytest.raises(ValueError, match="taken by 'lr_find'"):
        job_kinds.register(dataclasses.replace(toy.KIND, name="other_toy", key="l"))
    with pytest.raises(ValueError, match="command"):
        job_kinds.register(dataclasses.replace(toy.KIND, name="other_toy", command="nan-hunt", key="J"))


def test_a_toy_job_from_the_registry_runs_from_the_cli(toy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT / "tests")  # where the factory module lives, as a training's cwd would be
    import jobs_factory

    run = tmp_path / "run"
    jobs_factory.record(run, "jobs_factory:healthy", steps=3)
    toy.GATE.set()
    assert main(["toy-count", str(run), "--yes", "--steps", "4"]) == 0
    out = capsys.readouterr().out
    assert "Toy job: counted 4 steps (factory, Sequential)" in out
    assert latest_result(run, "toy_count")["result"]["counted"] == 4
    assert main(["toy-count", str(run), "--yes", "--steps", "100", "--json"]) == 1  # a verdict the kind calls negative
    assert main(["toy-count", str(run), "--yes", "--steps", "0"]) == 2  # its config refuses it
    assert "--steps must be at least 1" in capsys.readouterr().err


async def test_a_toy_job_from_the_registry_runs_live_from_the_monitor_with_a_progress_bar(toy, tmp_path: Path) -> None:
    """Sent by the monitor itself (no job process), followed on its status file, its bar shows steps, time and the cancel key."""
    run = tmp_path / "live"
    with training_thread(run, pause=0.05):  # 20 steps/s: jobs run at the next step; fewer idle steps to pay for
        app = TuidiagApp(run)
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=60)
            await pilot.press(toy.KIND.key)
            assert await wait_for(pilot, lambda: isinstance(app.screen, JobConfirmScreen))
            assert app.screen.live is not None and "up to 3 training steps" in app.screen.live
            assert app.screen.command.startswith("tuidiag toy-count ") and app.screen.command.endswith(" --live")
            await pilot.press("y")
            bar = app.screen.query_one(JobBar)
            assert await wait_for(pilot, lambda: bar.view is not None and (bar.view.state, bar.view.done, bar.view.total)
                                  == ("running", 1, 3), timeout=30)
            figures = str(bar.query_one("#job-figures", Static).render())
            assert figures.startswith("1/3  ") and " elapsed" in figures and f"{CANCEL_KEY} cancels" in figures
            assert bar.display and app._job_process is None  # no job process: the training runs it
            toy.GATE.set()
            assert await wait_for(pilot, lambda: app.job is None, timeout=30)
            assert not bar.display
            assert any("the toy count finished: counted its steps" in n.message for n in app._notifications)
            assert await wait_for(pilot, lambda: any(job == "toy_count" for job, _ in app.screen.detail.jobs), timeout=30)
            await pilot.press("7")
            assert "Toy job: counted 3 steps (live, Sequential)" in drawn_text(app.screen.query_one("#jobs-text", Static))
