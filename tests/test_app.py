"""Pilot tests of the monitor: keys, screens, live appends through the real watcher, replay."""

from __future__ import annotations

import numpy as np
import pytest
from textual.widgets import DataTable, Static

import tuidiag
from tests.app_helpers import DEMO_RUNS, fixed_clock, run_keys, settled, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.help import HelpScreen
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.diagnosis_panel import DiagnosisPanel


def _diagnosis_text(app) -> str:
    panel = app.screen.query_one(DiagnosisPanel)
    return str(panel.query_one("#diagnosis-text", Static).render())


async def test_overview_lists_runs_with_health_and_opens_one() -> None:
    app = TuidiagApp(DEMO_RUNS, clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        # five rows, each read (a run still being read is listed first, without its health)
        assert await wait_for(pilot, lambda: len(run_keys(app)) == 5 and settled(app, 5), timeout=60)
        healths = {s.name: s.health for s in app.summaries}
        assert healths["lr-too-high"] == "lr_too_high" and healths["healthy"] == "healthy"
        table = app.screen.query_one("#runs", DataTable)
        table.move_cursor(row=run_keys(app).index("lr-too-high"))
        await pilot.press("enter")
        assert isinstance(app.screen, RunScreen)
        assert await wait_for(pilot, lambda: app.screen.detail is not None)
        assert "Learning rate too high" in _diagnosis_text(app)
        await pilot.press("2", "g", "5", "6")
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_filter_sort_and_help() -> None:
    app = TuidiagApp(DEMO_RUNS, clock=fixed_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(run_keys(app)) == 5)
        await pilot.press("slash", *"over", "enter")
        assert run_keys(app) == ["overfitting"]
        await pilot.press("escape")
        assert len(run_keys(app)) == 5
        await pilot.press("s", "s", "s", "s")  # health: worst first
        assert run_keys(app)[0] == "lr-too-high"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_live_appends_arrive_through_the_watcher(tmp_path) -> None:
    rec = tuidiag.Recorder(tmp_path / "live", flush_interval=0.1)
    for _ in range(5):
        rec.step(1.0)
    rec.flush()
    app = TuidiagApp(tmp_path)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            assert await wait_for(pilot, lambda: [s.step for s in app.summaries] == [4] and app.watching)
            for _ in range(20):
                rec.step(0.5)
            rec.flush()
            assert await wait_for(pilot, lambda: [s.step for s in app.summaries] == [24])
            assert app.summaries[0].last_loss == 0.5 and app.summaries[0].status == "running"
    finally:
        rec.close()


async def test_polling_mode_sees_new_runs(tmp_path) -> None:
    app = TuidiagApp(tmp_path, poll=True, clock=fixed_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        assert not app.watching and app.summaries == []
        with tuidiag.Recorder(tmp_path / "late") as rec:
            rec.step(2.0)
        assert await wait_for(pilot, lambda: [s.name for s in app.summaries] == ["late"])


async def test_replay_cursor_shows_what_was_known_then() -> None:
    run = DEMO_RUNS / "lr-too-high"
    app = TuidiagApp(run, replay=True, clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        screen = app.screen
        await pilot.press("home")
        assert await wait_for(pilot, lambda: screen.detail.at == 0)
        await pilot.press(*["right"] * 12)  # one recorded step each (this run records every step)
        assert await wait_for(pilot, lambda: screen.detail.at == 12)
        assert "non-finite" not in _diagnosis_text(app)  # at step 12 the NaN had not happened
        await pilot.press("right_square_bracket")  # next event or finding
        assert await wait_for(pilot, lambda: screen.detail.at is not None and screen.detail.at > 12)
        await pilot.press("end")
        assert await wait_for(pilot, lambda: screen.detail.at == 254)
        assert "Loss became NaN" in _diagnosis_text(app)


async def test_hostile_names_render_literally(tmp_path) -> None:
    hostile = "[bold red]pwn[/] \x1b]0;title\x07\x1b[31mred"
    with tuidiag.Recorder(tmp_path / "hostile", name=hostile) as rec:
        rec.log({"[link=x]metric[/link]": 1.0})
        rec.step(1.0)
    app = TuidiagApp(tmp_path, clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 1)
        table = app.screen.query_one("#runs", DataTable)
        cell = table.get_row_at(0)[1]
        assert "[bold red]pwn[/]" in cell.plain and "\x1b" not in cell.plain


def test_layer_grid_keeps_a_single_spike_visible(tmp_path) -> None:
    from tuidiag.viewmodel.downsample import downsample

    steps = np.arange(1_000_000)
    values = np.ones(1_000_000)
    values[654_321] = 1e6
    x, y = downsample(steps, values, 200)
    assert len(x) <= 200 and y.max() == 1e6 and 654_321 in x.tolist()


async def test_command_palette_opens_a_run() -> None:
    app = TuidiagApp(DEMO_RUNS, clock=fixed_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(run_keys(app)) == 5)
        await pilot.press("ctrl+p", *"open overfit")
        await pilot.pause(0.5)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.key.endswith("overfitting"))


async def test_a_refresh_before_the_overview_is_mounted_is_drawn_once_it_is() -> None:
    """Under load a refresh can reach an overview whose widgets are not composed yet: kept, then drawn."""
    app = TuidiagApp(DEMO_RUNS)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 5)
        screen = OverviewScreen()
        screen.show(list(app.summaries), "elsewhere")  # not mounted: must not raise
        await app.push_screen(screen)
        assert await wait_for(pilot, lambda: screen.query_one("#runs", DataTable).row_count == 5)
        assert "5 runs" in str(screen.query_one("#overview-title", Static).render())


async def test_the_diagnosis_panel_says_live_only_for_a_running_run() -> None:
    """A finished or failed run's panel names its status and step, never "(live)"."""
    from tuidiag.app.widgets.diagnosis_panel import panel_title

    assert panel_title(254, None, "failed") == "Diagnosis (failed run, step 254)"
    assert panel_title(10, None, "running") == "Diagnosis (live)"
    assert panel_title(40, 40, "finished") == "Diagnosis at step 40"
    for step in (None, 0, 254):  # a diagnosis still running in the background has no step: never "step None"
        for at in (None, 7):
            for status in ("running", "finished", "failed", "crashed"):
                title = panel_title(step, at, status)
                assert "None" not in title and (step is not None or at is not None or status == "running"
                                                or title.endswith("run, not diagnosed yet)")), title
    app = TuidiagApp(DEMO_RUNS)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 5)
        app.open_run(str(DEMO_RUNS / "lr-too-high"))
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        assert app.screen.query_one(DiagnosisPanel).border_title == "Diagnosis (failed run, step 254)"


async def test_a_run_detail_before_the_run_screen_is_composed_is_drawn_once_it_is() -> None:
    """The same race as the overview's, on the run view (seen under load in CI): kept, then drawn on mount."""
    app = TuidiagApp(DEMO_RUNS)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 5)
        key = str(DEMO_RUNS / "lr-too-high")
        app.open_run(key)
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        detail = app.screen.detail
        await pilot.press("escape")
        screen = RunScreen(key)
        screen.show(detail)  # not composed: must not raise
        await app.push_screen(screen)
        assert await wait_for(pilot, lambda: "lr-too-high" in str(screen.query_one("#run-title", Static).render()))


async def test_a_run_first_listed_as_reading_does_not_read_as_missed_file_events() -> None:
    """Under load a run is first listed as 'reading' (no step), then read: that is no growth the watcher missed,
    so the monitor never claims 'file events are not arriving' (seen once in a CI snapshot)."""
    from tuidiag.viewmodel.snapshot import reading_summary

    app = TuidiagApp(DEMO_RUNS)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 5)
        read = list(app.summaries)
        app.watching = True
        app._steps = {}
        first = [reading_summary(s.key, s.name, 0.6) for s in read]
        app.post_message(TuidiagApp.RunsRefreshed(first, None))
        app.post_message(TuidiagApp.RunsRefreshed(read, None))
        await pilot.pause(0.3)
        assert app.watching, "a first read after 'reading' was taken for a missed file event"
        assert not any("file events are not arriving" in str(n.message) for n in app._notifications)


async def test_a_run_root_draws_its_run_view_first_and_its_overview_when_left(tmp_path) -> None:
    """Opened on one run, the app builds no overview before the run view's first frame; Esc shows it, with the run."""
    with tuidiag.Recorder(tmp_path / "solo", flush_interval=3600) as rec:
        for step in range(50):
            rec.step(1.0 / (step + 1))
    app = TuidiagApp(tmp_path / "solo", clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        assert not any(isinstance(screen, OverviewScreen) for screen in app.screen_stack)
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)
        assert await wait_for(pilot, lambda: run_keys(app) == ["solo"])
        await pilot.press("enter")  # and back into the run
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen) and len(app.screen_stack) == 2


@pytest.mark.parametrize("as_text", [True, False], ids=["str", "Path"])
async def test_the_app_opens_a_run_given_as_a_string_or_a_path(as_text: bool) -> None:
    """A script that passes the run's path as a string (a review's did) gets the run view, not a TypeError."""
    root = DEMO_RUNS / "lr-too-high"
    app = TuidiagApp(str(root) if as_text else root, clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        assert app.root == root
