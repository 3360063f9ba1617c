"""The monitor redraws only what changed, shows one steps/s, and writes no cache once closed.

- A refresh in which no run changed repaints nothing: no overview cell, no chart, no title.
- A late refresh (a diagnosis that ended after its refresh) of another run leaves the open run's view alone.
- Late refreshes queued together merge into one; with several runs writing, refreshes wait a flush period.
- The footer is not rebuilt when a tab key moves the focus but the keys shown stay the same.
- The run view of a run drawn from its envelopes shows the overview's steps/s, whatever metrics it records.
- Once ``RunsModel.close`` returns, no diagnosis writes a cache entry, even one running when it was called.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from textual.widgets import DataTable, Static

from tests.app_helpers import settled, wait_for
from tuidiag.app import app as app_module
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.cell_table import CellTable
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.app.widgets.steady_footer import SteadyFooter
from tuidiag.cli import status_cache
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.model import RunsModel


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _run(run_dir: Path, names: list[str], rate: float, steps: int = 400, status: str = "finished",
         values: dict[str, float] | None = None) -> None:
    """A run as the recorder leaves one (shards, ``run.json`` with its summary), ``rate`` steps per second of wall time;
    ``values``: a fixed value per metric (else a falling loss)."""
    writer = ShardWriter(run_dir, rank=0, flush_interval=3600)
    layout = Layout(names)
    for start in range(0, steps, 100):
        for step in range(start, min(steps, start + 100)):
            row = [(values or {}).get(name, 1.0 / (1 + step / 100)) for name in names]
            writer.submit(MetricBatch(step, 1.7e9 + step / rate, layout, np.array(row)))
        writer.flush()
    writer.close()
    manifest = new_manifest(run_dir.name, {}, 1, 1.0)
    manifest.update(status=status, last_step=writer.last_step, summary=writer.tail.to_json())
    write_manifest(run_dir, manifest)


def _steps_per_s(system: tuple[tuple[str, str], ...]) -> str | None:
    return next((value for label, value in system if label == "steps/s"), None)


@pytest.mark.parametrize("rate", [0.5, 20.0, 3000.0])
@pytest.mark.parametrize("names", [["train/loss"], ["train/loss", "time/step"], ["train/loss", "time/step", "time/data_wait"]],
                         ids=["log-only", "with-step-time", "with-data-wait"])
def test_the_run_view_shows_the_overviews_steps_per_s(tmp_path: Path, rate: float, names: list[str]) -> None:
    """One source for steps/s: the run view of an envelope run shows the overview's figure, also when the run records
    no ``time/step`` (it said "no timing recorded") and when its ``time/step`` says another pace (here 0.25 s)."""
    _run(tmp_path / "run", names, rate, values={"time/step": 0.25, "time/data_wait": 0.05})
    model = RunsModel(tmp_path)
    model.discover()
    (summary,) = model.refresh()
    detail = model.detail(summary.key, points=100)
    assert detail is not None and model._slots[tmp_path / "run"].envelopes is not None  # drawn from its envelopes
    assert summary.steps_per_s == pytest.approx(rate, rel=1e-6)
    assert _steps_per_s(detail.system) == fmt(summary.steps_per_s)
    shown = dict(detail.system).get("data wait")
    assert (shown.split(" ", 1)[0] if shown else None) == ("20%" if "time/data_wait" in names else None)


def test_once_closed_no_diagnosis_writes_the_cache(tmp_path: Path, cache: Path) -> None:
    """``close`` at any point of a diagnosis (queued, reading, diagnosing, writing): once it returns, the cache
    directory never changes. Each round closes at another moment of the same diagnosis."""
    rng = random.Random(14)
    for round_ in range(8):
        root = tmp_path / f"root{round_}"
        _run(root / "run", ["train/loss", "grad_norm/total"], 20.0, steps=300)
        model = RunsModel(root)
        model.discover()
        model.refresh()  # queues the diagnosis, which writes the cache when it ends
        slot = model._slots[root / "run"]
        time.sleep(rng.uniform(0.0, 0.05))
        model.close()
        entries = sorted(cache.rglob("*.json")) if cache.exists() else []
        assert slot.diagnosing is not None and slot.diagnosing.finished.wait(30)
        assert (sorted(cache.rglob("*.json")) if cache.exists() else []) == entries


def test_a_closed_model_starts_no_queued_diagnosis(tmp_path: Path, cache: Path) -> None:
    """A diagnosis queued behind another when the monitor closes reads nothing and caches nothing."""
    _run(tmp_path / "run", ["train/loss"], 20.0)
    model = RunsModel(tmp_path)
    held = threading.Event()
    model._diagnosis_pool.submit(held.wait)  # the one diagnosis thread is busy: the run's diagnosis waits its turn
    model.discover()
    model.refresh()
    model.close()
    held.set()
    slot = model._slots[tmp_path / "run"]
    assert slot.diagnosing is not None and slot.diagnosing.finished.wait(30)
    assert status_cache.load(tmp_path / "run") is None and slot.run is None


async def _refresh_with_nothing_new(app: TuidiagApp, pilot) -> None:
    """Three refreshes of every run, each given time to land, then every worker done and the screen idle."""
    for _ in range(3):
        app.request_refresh(None)
        await pilot.pause(0.2)
    await app.workers.wait_for_complete()
    await pilot.pause()


def _count(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    """Count calls of ``cls.name`` (the real method still runs)."""
    calls = [0]
    original = getattr(cls, name)

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


async def test_a_refresh_with_nothing_new_repaints_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refreshes of runs whose files did not change update no overview cell, draw no chart, set no title; a late
    refresh of another run does not rebuild the open run's view, one of the open run does."""
    for name in ("a", "b"):
        _run(tmp_path / name, ["train/loss", "grad_norm/total"], 20.0)
    app = TuidiagApp(tmp_path, poll=True)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 2 and all(s.health != "-" for s in app.summaries))
        await pilot.pause(0.3)
        table = app.screen.query_one("#runs", DataTable)
        updates = _count(monkeypatch, DataTable, "update_cell_at")
        changes = _count(monkeypatch, CellTable, "update_cells")
        rows = _count(monkeypatch, DataTable, "add_row")
        await _refresh_with_nothing_new(app, pilot)
        assert (updates[0], changes[0], rows[0], table.row_count) == (0, 0, 0, 2)

        app.open_run(str(tmp_path / "a"))
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                              and bool(app.screen.detail.diagnosis.findings or app.screen.detail.diagnosis.notes))
        await pilot.pause(0.3)
        screen = app.screen
        chart = screen.query_one("#chart-loss", MetricChart)
        version, drawn = chart._version, _count(monkeypatch, MetricChart, "render")
        details = _count(monkeypatch, TuidiagApp, "load_detail")
        texts = _count(monkeypatch, Static, "update")
        await _refresh_with_nothing_new(app, pilot)
        assert (chart._version, drawn[0]) == (version, 0)
        assert texts[0] == 0  # no title, strip, diagnosis or grid text set again
        title = screen._texts["#run-title"]
        app._read_late(tmp_path / "b")  # another run's diagnosis ended: the open run's view is not rebuilt
        await pilot.pause(0.2)
        assert details[0] == 0
        app._read_late(tmp_path / "a")
        await pilot.pause(0.2)
        assert details[0] == 1 and screen._texts["#run-title"] == title


async def test_a_refresh_in_which_one_run_grew_draws_only_that_runs_changed_cells(tmp_path: Path) -> None:
    """One run of three got a new step and loss: the overview renders again its step and loss cells and nothing else
    (no other cell of its row, no other row, not the header), and shows the new values."""
    for name in ("a", "b", "c"):
        _run(tmp_path / name, ["train/loss", "grad_norm/total"], 20.0)
    app = TuidiagApp(tmp_path, poll=True)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: settled(app, 3))
        await _refresh_with_nothing_new(app, pilot)
        screen = app.screen
        table = screen.query_one("#runs", CellTable)
        table.refresh()  # drawn whole once more: every cell as it is now, before the one run grows
        assert await wait_for(pilot, lambda: len(_current_cells(table)) == 4 * len(table.columns))
        grown = next(s for s in app.summaries if s.name == "b")
        newer = dataclasses.replace(grown, step=grown.step + 1, last_loss=0.3)
        assert fmt(newer.last_loss) != fmt(grown.last_loss)
        screen.show([newer if s is grown else s for s in app.summaries], str(tmp_path))
        kept = _current_cells(table)  # the renderings kept: all but those of the cells that changed
        await pilot.pause()
        drawn = {(table.get_row_index(row), table.ordered_columns[table.get_column_index(column)].label.plain)
                 for row, column in _current_cells(table) - kept}
        row = table.get_row_index(grown.key)
        assert drawn == {(row, "step"), (row, "loss")}
        assert table.get_row(grown.key)[[c.label.plain for c in table.ordered_columns].index("loss")].plain == fmt(newer.last_loss)


async def test_the_overview_under_a_run_view_is_drawn_when_shown_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Summaries that come while a run view hides the overview change no cell of its table; back on the overview,
    the table shows the newest."""
    for name in ("a", "b"):
        _run(tmp_path / name, ["train/loss"], 20.0)
    app = TuidiagApp(tmp_path, poll=True)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: settled(app, 2))
        app._poll_timer.stop()  # no refresh of the app's own replaces the summaries given below
        overview = app.screen
        table = overview.query_one("#runs", CellTable)
        app.open_run(str(tmp_path / "a"))
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        changes, rows = _count(monkeypatch, CellTable, "update_cells"), _count(monkeypatch, DataTable, "add_row")
        grown = next(s for s in app.summaries if s.name == "b")
        newer = dataclasses.replace(grown, step=grown.step + 1, last_loss=0.3)
        overview.show([newer if s is grown else s for s in app.summaries], str(tmp_path))
        await pilot.pause()
        assert (changes[0], rows[0]) == (0, 0)
        loss = [c.label.plain for c in table.ordered_columns].index("loss")
        await pilot.press("escape")
        shown = lambda: next(s for s in overview.summaries if s.key == grown.key)  # noqa: E731 - the newest it was given
        assert await wait_for(pilot, lambda: app.screen is overview and not overview._behind
                              and table.get_row(grown.key)[loss].plain == fmt(shown().last_loss))


def _current_cells(table: CellTable) -> set[tuple[object, object]]:
    """(row key, column key) of every cell rendering the table holds for its present state."""
    return {(key[0], key[1]) for key in table._cell_render_cache.keys() if key[6] == table._update_count}


async def test_late_refreshes_merge_and_busy_runs_refresh_once_a_flush_period(tmp_path: Path) -> None:
    """Late refreshes waiting in the queue merge into one naming every run; with several runs writing the next refresh
    waits at least a flush period, with one it comes at once."""
    _run(tmp_path / "a", ["train/loss"], 20.0)
    app = TuidiagApp(tmp_path, poll=True)
    first = TuidiagApp.RunsRefreshed([], None, late=True, runs=frozenset({"a"}))
    second = TuidiagApp.RunsRefreshed([], None, late=True, runs=frozenset({"b"}))
    regular = TuidiagApp.RunsRefreshed([], None)
    assert second.can_replace(first) and second.runs == {"a", "b"}
    assert not regular.can_replace(second) and not second.can_replace(regular)
    now = time.monotonic()
    app._last_refresh = now
    app._event_times = {"a": now}
    assert app._refresh_delay(now) == app_module.COALESCE
    app._event_times = {"a": now, "b": now - 0.5, "c": now - 1.0}
    assert app._refresh_delay(now) >= app_module.REFRESH_PERIOD


def test_a_refreshs_cost_takes_in_the_late_ones_before_it(tmp_path: Path) -> None:
    """The CPU used between two refreshes is the cost of one, however many late announcements (diagnoses that ended
    after their refresh) came between them; with several busy runs the next refresh waits for the budget, at most
    ``SLOW_POLL``."""
    app = TuidiagApp(tmp_path, poll=True)
    mark = app._cpu_mark
    late = TuidiagApp.RunsRefreshed([], None, late=True, runs=frozenset({"a"}))
    for _ in range(3):
        sum(range(200_000))  # CPU used: a diagnosis, say
        app.on_tuidiag_app_runs_refreshed(late)
        assert (app._cpu_mark, app._refresh_cost) == (mark, 0.0)
    app.on_tuidiag_app_runs_refreshed(TuidiagApp.RunsRefreshed([], None))
    assert app._cpu_mark > mark and app._refresh_cost == pytest.approx(0.3 * (app._cpu_mark - mark))
    now = time.monotonic()
    app._last_refresh, app._event_times = now, {"a": now, "b": now}
    app._refresh_cost = 1.0  # a second of CPU per refresh: more than the budget allows within SLOW_POLL
    assert app._refresh_delay(now) == app_module.SLOW_POLL


def test_a_poll_next_to_a_refresh_of_every_run_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With file events the poll reads every run only when no refresh of every run came within half its period and
    none of file events is on its way; a refresh of file events reads every run once the last such refresh is that old
    (with many busy runs both came every few seconds, each rebuilding the open run's view)."""
    app = TuidiagApp(tmp_path, poll=True)
    asked: list[set[Path] | None] = []
    monkeypatch.setattr(app, "request_refresh", asked.append)
    app._poll_period, app._full_refresh = app_module.SLOW_POLL, time.monotonic()
    app._poll()
    assert asked == []
    app._pending = {tmp_path / "a"}
    app._flush_pending()
    assert asked == [{tmp_path / "a"}]
    app._full_refresh -= app_module.SLOW_POLL
    app._pending = {tmp_path / "a"}
    app._flush_pending()
    assert asked[-1] is None
    app._flush_timer = object()  # a refresh of file events is on its way
    app._poll()
    assert len(asked) == 2
    app._flush_timer = None
    app._poll()
    assert len(asked) == 3 and asked[-1] is None


async def test_a_tab_key_that_moves_the_focus_keeps_the_footer(tmp_path: Path) -> None:
    """Into the events table and back to a chart: the focus moves, the keys shown do not, the footer stays as built."""
    _run(tmp_path / "run", ["train/loss"], 20.0)
    app = TuidiagApp(tmp_path / "run", poll=True)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await pilot.press("6")
        await pilot.pause()
        footer = app.screen.query_one(SteadyFooter)
        keys = list(footer.children)
        for key in "16" * 2:
            await pilot.press(key)
            await pilot.pause()
        assert keys and list(footer.children) == keys
        shown = {b.key for (_, b, _, _) in app.screen.active_bindings.values() if b.show}
        assert {str(k.key) for k in keys if hasattr(k, "key")} - {"ctrl+p"} <= shown  # still what the screen binds (and the palette)



async def test_the_run_view_composes_its_footer_keys_once_when_it_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual's footer queues a recompose for each change of bindings; the view's first frames bring three, all
    with the same keys: the keys are composed once, and they are the ones the screen binds."""
    composed: list[int] = []
    compose = SteadyFooter.compose

    def counted(self: SteadyFooter):
        widgets = list(compose(self))
        if widgets:
            composed.append(len(widgets))
        yield from widgets

    monkeypatch.setattr(SteadyFooter, "compose", counted)
    _run(tmp_path / "run", ["train/loss"], 20.0)
    app = TuidiagApp(tmp_path / "run", poll=True)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        for _ in range(3):
            await pilot.pause()
        footer = app.screen.query_one(SteadyFooter)
        assert len(composed) == 1 and len(footer.children) == composed[0]
        shown = {b.key for (_, b, _, _) in app.screen.active_bindings.values() if b.show}
        assert {str(k.key) for k in footer.children if hasattr(k, "key")} - {"ctrl+p"} == shown


@pytest.mark.parametrize("change", ["nothing", "run.json rewritten", "a shard added behind run.json", "a shard behind run.json for long"])
def test_a_refresh_parses_run_json_only_when_the_files_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """An unchanged run is summarised again without parsing its ``run.json``; a rewritten ``run.json`` is parsed, and a
    metrics shard newer than its summary is seen: the run shows its last summary while its ``run.json`` may be on its
    way (``TAIL_GRACE``), and is read whole, as a run without a current summary, once it is behind for longer."""
    from tuidiag.viewmodel import model as model_module

    run_dir = tmp_path / "run"
    _run(run_dir, ["train/loss"], 20.0)
    model = RunsModel(tmp_path)
    model.discover()
    (first,) = model.refresh()
    parsed = _count_function(monkeypatch, model_module, "read_manifest")
    if change == "run.json rewritten":
        (run_dir / "run.json").write_text((run_dir / "run.json").read_text().replace('"finished"', '"failed"'))
    elif change.startswith("a shard"):
        writer = ShardWriter(run_dir, rank=0, flush_interval=3600)
        writer.submit(MetricBatch(400, 1.7e9 + 20.0, Layout(["train/loss"]), np.array([0.5])))
        writer.close()
    if change.endswith("for long"):
        monkeypatch.setattr(model_module, "TAIL_GRACE", 0.0)
    (second,) = model.refresh()
    slot = model._slots[run_dir]
    if change == "nothing":
        assert parsed[0] == 0 and second.step == first.step and slot.tail is not None
    elif change == "run.json rewritten":
        assert parsed[0] == 1 and second.status == "failed"
    elif change == "a shard added behind run.json":
        assert parsed[0] == 1 and slot.tail is not None and (second.step, second.last_loss) == (first.step, first.last_loss)
    else:
        assert parsed[0] == 1 and slot.tail is None and second.last_loss == 0.5


def _count_function(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Count calls of ``module.name`` (the real function still runs)."""
    calls = [0]
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls
