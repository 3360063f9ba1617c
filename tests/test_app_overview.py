"""The overview: runs by their path under the root, the sorted column marked, "2 of 5 runs"
while filtered, the table focused after the filter (Pilot, and the labels by hypothesis).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual.widgets import DataTable, Static

from tests.app_helpers import fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.overview import COLUMNS
from tuidiag.importers.run_writer import write_run
from tuidiag.importers.source import SourceRun, SourceSeries
from tuidiag.viewmodel.overview_rows import SORT_NAMES, run_label, shorten_label
from tuidiag.viewmodel.snapshot import reading_summary

RUNS = {  # directory under the root -> (last step, final loss)
    "a/seed0": (40, 0.5),
    "b/seed0": (90, 2.0),
    "c/deep/seed1": (10, 0.1),
    "exp/x": (70, 1.0),
    "top": (30, 3.0),
}
CUSTOM = {"exp/x": "custom"}
"""Runs whose run.json names them otherwise than their directory."""
LABELS = {"a/seed0": "a/seed0", "b/seed0": "b/seed0", "c/deep/seed1": "c/deep/seed1", "exp/x": "exp/custom", "top": "top"}


@pytest.fixture(scope="module")
def nested_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nested")
    for relative, (last, final) in RUNS.items():
        steps = np.arange(last + 1)
        loss = np.linspace(final * 4, final, last + 1)
        written = write_run(SourceRun(Path(relative), [SourceSeries("loss", steps, loss, 1000.0 + steps)], {"kind": "test"}), root)
        if relative in CUSTOM:
            manifest = json.loads((written.path / "run.json").read_text())
            (written.path / "run.json").write_text(json.dumps({**manifest, "name": CUSTOM[relative]}))
    return root


def _rows(table: DataTable) -> list[str]:
    return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]


def _title(app) -> str:
    return str(app.screen.query_one("#overview-title", Static).render())


async def test_labels_sort_arrow_filter_count_and_focus(nested_root: Path) -> None:
    app = TuidiagApp(nested_root, clock=fixed_clock)
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.screen.query_one("#runs", DataTable)
        assert await wait_for(pilot, lambda: table.row_count == len(RUNS) and all(s.step is not None for s in app.summaries), 30)
        assert sorted(_rows(table)) == sorted(LABELS.values())  # nested runs apart, named as they are
        by_label = {LABELS[r]: v for r, v in RUNS.items()}

        orders = {"name": lambda rows: rows == sorted(rows, key=str.lower),
                  "status": lambda rows: True,  # all finished: any order
                  "step": lambda rows: [by_label[r][0] for r in rows] == sorted((v[0] for v in RUNS.values()), reverse=True),
                  "loss": lambda rows: [by_label[r][1] for r in rows] == sorted(v[1] for v in RUNS.values()),
                  "health": lambda rows: True}
        for i, sort in enumerate(SORT_NAMES):
            if i:
                await pilot.press("s")
            headers = [str(c.label) for c in table.columns.values()]
            marked = [h for h in headers if h.endswith(("▲", "▼"))]
            assert len(marked) == 1 and marked[0].split()[0] == {"name": "run"}.get(sort, sort), (sort, headers)
            assert [h.split()[0] if h.strip() else h for h in headers] == [c.split()[0] if c else c for c in COLUMNS]
            assert orders[sort](_rows(table)), (sort, _rows(table))
        await pilot.press("s")  # back to name

        for needle in ("seed0", "deep", "a/", "custom", "zzz", "finished", "SEED"):
            await pilot.press("escape", "slash", *needle, "enter")
            shown = sum(needle.lower() in label.lower() or needle.lower() in "finished" for label in LABELS.values())
            assert f" {shown} of {len(RUNS)} runs" in _title(app), (needle, _title(app))
            assert table.row_count == shown
            assert app.focused is table  # Enter in the filter gives the keys back to the table
            if shown >= 2:
                before = table.cursor_row
                await pilot.press("down")
                assert table.cursor_row == before + 1
        await pilot.press("escape")
        assert f" {len(RUNS)} runs" in _title(app) and " of " not in _title(app) and table.row_count == len(RUNS)


parts = st.text(alphabet="abc01-", min_size=1, max_size=4)


@given(st.lists(parts, min_size=1, max_size=4), st.one_of(st.none(), parts))
def test_a_label_is_the_runs_place_under_the_root_and_ends_with_its_name(relative: list[str], custom: str | None) -> None:
    root = "/runs"
    path = PurePosixPath(root, *relative)
    name = custom or relative[-1]
    label = run_label(reading_summary(str(path), name, 0), root)
    assert label.endswith(name)
    if len(relative) == 1:
        assert label == name  # a run right under the root: its name alone, as before
    else:
        assert label == "/".join(relative[:-1] + [name])
    imported = run_label(reading_summary(str(path), "/".join(relative), 0), root)  # tuidiag import names runs by path
    assert imported == "/".join(relative)


@given(st.lists(parts, min_size=1, max_size=3), st.lists(parts, min_size=1, max_size=3), parts)
def test_two_runs_of_one_name_in_different_places_read_differently(first: list[str], second: list[str], name: str) -> None:
    a, b = PurePosixPath("/runs", *first, name), PurePosixPath("/runs", *second, name)
    if a != b:
        assert run_label(reading_summary(str(a), name, 0), "/runs") != run_label(reading_summary(str(b), name, 0), "/runs")


@given(st.lists(st.text(alphabet="ab-/", min_size=1, max_size=12), min_size=1, max_size=4), st.integers(4, 30))
def test_a_long_label_keeps_the_runs_name_or_its_start(parts: list[str], width: int) -> None:
    name, label = parts[-1], "/".join(parts)
    shown = shorten_label(label, name, width)
    assert len(shown) <= width
    if len(label) <= width:
        assert shown == label
    elif len(name) < width:
        assert shown.endswith(name) and shown.startswith("\N{HORIZONTAL ELLIPSIS}")  # the parents give way
    else:
        assert shown == label[: width - 1] + "\N{HORIZONTAL ELLIPSIS}"  # a name too long: its start
