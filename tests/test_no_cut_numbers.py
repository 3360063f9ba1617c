"""No number is cut short on a narrow terminal: every overview column and every figure of the run view's
header is shown whole, elided with ``…``, or left out (and then named), across terminal widths 40 to 220
and value magnitudes from 0 to 1e38, NaN and inf.

The regression: at 60x20 the overview's step column showed ``1,49`` for step 1,499 (the table ran past
the screen's right edge and the edge cut the number).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings, strategies as st
from textual.app import App
from textual.widgets import DataTable, Static

from tests.conftest import examples
from tests.app_helpers import DEMO_RUNS, FIXED_NOW, drawn_text
from tuidiag.app.screens.overview import COLUMNS, OverviewScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.text.numbers import fmt
from tuidiag.viewmodel.detail import build_detail
from tuidiag.viewmodel.header_fit import ELLIPSIS, elide, fit_figures, title_name_width
from tuidiag.viewmodel.overview_rows import COLUMN_PADDING, HIDDEN_FIRST, RUN_LEAST, fit_columns
from tuidiag.viewmodel.snapshot import RunSummary, summarize

WIDTHS = (40, 50, 60, 80, 100, 120, 160, 220)
STEPS = (0, 7, 1_499, 1_234_567, 98_765_432_101)
VALUES = (0.0, 1e-12, -3.5e-7, 0.116, 1234.5, 99_999.0, -9.9e37, math.nan, math.inf, -math.inf, None)

numbers = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                    st.floats(min_value=-1e6, max_value=1e6), st.integers(-10**12, 10**12).map(float))


# ---- the fitting rules, over any widths ------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(widths=st.lists(st.integers(1, 40), min_size=len(COLUMNS), max_size=len(COLUMNS)), available=st.integers(40, 220))
def test_fit_columns_shows_whole_columns_within_the_width(widths: list[int], available: int) -> None:
    shown, run_width = fit_columns(COLUMNS, widths, available)
    width = dict(zip(COLUMNS, widths))
    assert "run" in shown and "" in shown and list(shown) == [c for c in COLUMNS if c in shown]
    used = sum((run_width if c == "run" else width[c]) + COLUMN_PADDING for c in shown)
    assert run_width <= width["run"]
    assert used <= available or run_width == min(width["run"], RUN_LEAST)
    for hidden in set(COLUMNS) - set(shown):  # each column left out could not have fitted whole in what is left
        assert hidden in HIDDEN_FIRST and used + width[hidden] + COLUMN_PADDING > available
    if sum(w + COLUMN_PADDING for w in widths) <= available:
        assert shown == COLUMNS and run_width == width["run"]


@settings(max_examples=examples(150), deadline=None)
@given(figures=st.lists(st.tuples(st.text("abc/ ", min_size=1, max_size=12), numbers.map(lambda v: "-" if v is None else fmt(v))),
                        max_size=6), width=st.integers(0, 220))
def test_fit_figures_keeps_whole_figures_in_order(figures: list[tuple[str, str]], width: int) -> None:
    shown, cut = fit_figures(figures, width)
    assert list(shown) == figures[: len(shown)] and cut == (len(shown) < len(figures))
    line = "".join(f"{label} {value}   " for label, value in shown).rstrip() + (ELLIPSIS if cut else "")
    assert len(line) <= max(width, 0) or (not shown and len(line) <= 1)


@settings(max_examples=examples(100), deadline=None)
@given(name=st.text(min_size=1, max_size=60), step=st.sampled_from(STEPS), width=st.integers(10, 220))
def test_the_title_elides_the_name_never_the_step(name: str, step: int, width: int) -> None:
    rest = f" | finished | step {step}"
    shown = elide(name, title_name_width(name, rest, width))
    assert shown == name or (shown.endswith(ELLIPSIS) and name.startswith(shown[:-1]))
    if len(rest) + min(len(name), 4) <= width:  # room for the step: it is whole on the line
        assert len(shown + rest) <= width


# ---- the real overview at each width -----------------------------------------------------------------------------------


def _summaries() -> list[RunSummary]:
    """One run per magnitude: every step size and every value (the longest ``fmt`` output included)."""
    base = summarize(open_run(DEMO_RUNS / "healthy"), diagnose(open_run(DEMO_RUNS / "healthy")), now=FIXED_NOW)
    out = []
    for i in range(max(len(STEPS), len(VALUES))):
        value = VALUES[i % len(VALUES)]
        out.append(dataclasses.replace(base, key=f"/runs/r{i}", name=f"run-{i}-" + "x" * (i * 3), step=STEPS[i % len(STEPS)],
                                       last_loss=value, steps_per_s=VALUES[(i + 3) % len(VALUES)],
                                       lr=VALUES[(i + 5) % len(VALUES)], grad_norm=VALUES[(i + 7) % len(VALUES)]))
    return out


class _OverviewHost(App):
    def on_mount(self) -> None:
        self.push_screen(OverviewScreen())


async def _check_overview(sizes: list[tuple[int, int]], rows: list[RunSummary], root: str) -> None:
    """At each of ``sizes`` in turn (the first as the app starts, the others as the terminal is resized to
    them): every cell on screen is whole (its text is on its row's line), the table ends within the screen,
    and every column left out is named in the hint."""
    app = _OverviewHost()
    async with app.run_test(size=sizes[0]) as pilot:
        screen = app.screen
        screen.show(rows, root)
        for width, height in sizes:
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            _overview_cells_whole(screen, width)


def _overview_cells_whole(screen: OverviewScreen, width: int) -> None:
    table = screen.query_one("#runs", DataTable)
    used = sum(c.get_render_width(table) for c in table.ordered_columns)
    assert used <= table.scrollable_content_region.width, f"{width}: the table runs past the screen's edge"
    headers = [c.label.plain.split(" ")[0] for c in table.ordered_columns]
    lines = drawn_text(table).splitlines()
    for row in range(table.row_count):
        line = lines[row + 1]
        for column, cell in enumerate(table.get_row_at(row)):
            text = getattr(cell, "plain", "")
            assert table.ordered_columns[column].content_width >= len(text)
            assert text in line, f"{width}: {headers[column]!r} shows {text!r} cut in {line!r}"
    hidden = [c for c in COLUMNS if c and c not in headers]
    hint = drawn_text(screen.query_one("#overview-hint", Static)).replace("\n", " ")
    if hidden:
        assert all(c in hint for c in hidden) and "hidden" in hint, width
    else:
        assert hint.strip() == "", width
    if width >= 220:
        assert not hidden


async def test_every_overview_cell_is_whole_or_its_column_is_named_hidden() -> None:
    """Each of WIDTHS, narrowest first, then back to the narrowest (one app: an app per width cost more
    than the checks)."""
    await _check_overview([(width, 24) for width in (*WIDTHS, WIDTHS[0])], _summaries(), "/runs")


async def test_the_review_60x20_demo_overview() -> None:
    """The reported case: the demo runs at 60x20 (step showed ``1,49``)."""
    runs = [open_run(path.parent) for path in sorted(DEMO_RUNS.glob("*/run.json"))]
    await _check_overview([(60, 20)], [summarize(run, diagnose(run), now=FIXED_NOW) for run in runs], str(DEMO_RUNS))


# ---- the run view's header -------------------------------------------------------------------------------------------


class _RunHost(App):
    def on_mount(self) -> None:
        self.push_screen(RunScreen("r"))


@pytest.fixture(scope="module")
def healthy_detail():
    run = open_run(DEMO_RUNS / "healthy")
    diagnosis = diagnose(run)
    return build_detail(run, summarize(run, diagnosis, now=FIXED_NOW), diagnosis, None, 200)


async def test_the_run_view_header_shows_whole_figures(healthy_detail) -> None:
    """At each of WIDTHS, narrowest first, then back to the narrowest (one app, resized)."""
    detail = dataclasses.replace(
        healthy_detail, summary=dataclasses.replace(healthy_detail.summary, name="a-run-with-a-long-name-" * 3, step=98_765_432_101),
        system=(("steps/s", fmt(123456.7)), ("data wait", "45%"), ("mem", "12.3 GiB"), ("peak", "15.9 GiB"), ("GPU", "100%")))
    app = _RunHost()
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        app.screen.show(detail)
        for width in (*WIDTHS, WIDTHS[0]):
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            title = drawn_text(app.screen.query_one("#run-title", Static)).rstrip()
            assert "step 98765432101" in title and len(title) <= width, (width, title)
            strip = drawn_text(app.screen.query_one("#system-strip", Static)).rstrip()
            present = [f"{label} {value}" for label, value in detail.system if f"{label} {value}" in strip]
            assert present == [f"{label} {value}" for label, value in detail.system[: len(present)]], width
            assert strip.endswith(ELLIPSIS) == (len(present) < len(detail.system)), width
            assert strip.replace(ELLIPSIS, "").split() == " ".join(present).split()  # nothing but whole figures
