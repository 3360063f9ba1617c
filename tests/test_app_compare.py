"""The compare screen shows what ``tuidiag compare`` prints, with its title always in view (Pilot).

The comparison on screen is the CLI's (``compare_runs`` on the runs read afresh), the first
run marked is A, the title and verdict stay at the top whatever is scrolled or shown,
and names from run files are shown literally.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from rich.console import Console
from textual.widgets import DataTable, Static

from tests.app_helpers import DEMO_RUNS, fixed_clock, run_keys, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.compare import CompareScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.importers.run_writer import write_run
from tuidiag.importers.source import SourceRun, SourceSeries
from tuidiag.report.compare import METRICS, compare_runs
from tuidiag.store import open_run


def _plain(widget: Static, width: int = 200) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def _mark_and_compare(pilot, app, names: list[str]) -> CompareScreen:
    table = app.screen.query_one("#runs", DataTable)
    for name in names:
        table.move_cursor(row=run_keys(app).index(name))
        await pilot.press("space")
    await pilot.press("c")
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    assert await wait_for(pilot, lambda: screen.view is not None, 60)
    return screen


def _title_on_top(app, screen: CompareScreen) -> bool:
    title = screen.query_one("#compare-title", Static)
    widget, _ = app.screen.get_widget_at(5, 0)
    return widget is title and "compare" in _plain(title)


async def test_compare_shows_the_cli_table_and_verdict_with_a_docked_title() -> None:
    app = TuidiagApp(DEMO_RUNS, clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_for(pilot, lambda: len(run_keys(app)) == 5, 60)
        screen = await _mark_and_compare(pilot, app, ["lr-too-high", "healthy"])  # marked first: A
        expected = compare_runs(open_run(DEMO_RUNS / "lr-too-high"), open_run(DEMO_RUNS / "healthy"))
        assert [c.to_json() for c in screen.view.comparisons] == [expected.to_json()]
        title = _plain(screen.query_one("#compare-title", Static))
        assert title.index("A: lr-too-high") < title.index("B: healthy")
        assert expected.verdict in " ".join(_plain(screen.query_one("#compare-verdict", Static), 400).split())
        numbers = _plain(screen.query_one("#compare-table", Static))
        assert all(label in numbers for _, label, _ in METRICS) and "Findings disappeared" in numbers
        assert _title_on_top(app, screen)
        for keys in (("pagedown", "pagedown", "end"), ("2",), ("g",), ("3",), ("4",), ("1",), ("down",) * 30):
            await pilot.press(*keys)
            assert _title_on_top(app, screen), keys
        await pilot.press("2")
        chart = screen.query_one("#cmp-chart-loss", MetricChart)
        first_bad = expected.a["diverged_step"]  # lr-too-high's loss goes NaN there: its legend entry says so
        assert [name for name, _, _ in chart.chart.lines] == [f"lr-too-high (NaN from {first_bad})", "healthy"]
        assert chart.chart.nonfinite_steps == (first_bad,)
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)


async def test_several_runs_compare_with_the_first_and_names_stay_literal(tmp_path: Path) -> None:
    names = ["base", "[b]evil[/b] \x1b[31m", "later"]
    steps = np.arange(60)
    for i, name in enumerate(names):
        loss = 2.0 / (1 + steps * (i + 1) / 10)
        write_run(SourceRun(Path(name), [SourceSeries("loss", steps, loss, 1000.0 + steps)], {"kind": "test"}), tmp_path)
    app = TuidiagApp(tmp_path, clock=fixed_clock)
    async with app.run_test(size=(200, 50)) as pilot:
        assert await wait_for(pilot, lambda: len(run_keys(app)) == 3 and all(s.step is not None for s in app.summaries), 60)
        keys = run_keys(app)
        screen = await _mark_and_compare(pilot, app, [keys[keys.index("base")], *[k for k in keys if k != "base"]])
        assert len(screen.view.comparisons) == 2 and {c.a["name"] for c in screen.view.comparisons} == {"base"}
        verdicts = _plain(screen.query_one("#compare-verdict", Static), 400)
        assert "B1 " in verdicts and "B2 " in verdicts and "B improves on A" in verdicts
        shown = _plain(screen.query_one("#compare-title", Static), 400) + _plain(screen.query_one("#compare-table", Static))
        assert "[b]evil[/b]" in shown and "\x1b" not in shown  # markup shown as text, escapes removed
        assert screen.query_one("#cmp-chart-numbers", MetricChart).display  # tall: the loss overlay under the table
