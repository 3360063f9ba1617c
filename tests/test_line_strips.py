"""A chart drawn through the Line API looks exactly as Textual draws the same ``Text`` (``line_strips``).

Textual turns a widget's ``Text`` into strips through its own ``Content``; the chart builds its strips
directly. Both are compared cell by cell (the character and what its style shows) for every chart of
the demo runs at sizes from the smallest to wide, in both scales, with and without a cursor, and for
generated rows: styled and unstyled runs, string and named styles, characters of one cell and of two,
rows that fill the widget or fall short, and the widget's own style under them. Offsets (the
metadata text selection reads) are compared too, and a selection is drawn by Textual, highlighted.
"""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.style import Style as TextualStyle
from textual.visual import Visual, visualize

from tests.conftest import ROOT, examples, full_only
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.chart import MetricChart, draw_chart
from tuidiag.app.widgets.layers import LayerHeatmap, render_grid
from tuidiag.app.widgets.line_strips import text_strips
from tuidiag.viewmodel.snapshot import Chart

COLORS = [None, "red", "#00afd7", "color(240)", "bright_white"]
styles = st.builds(lambda c, b, bold, dim: Style(color=c, bgcolor=b, bold=bold, dim=dim), st.sampled_from(COLORS),
                   st.sampled_from(COLORS), st.sampled_from([None, True, False]), st.sampled_from([None, True]))
CHARACTERS = [" ", "a", "b", "é", "⠁", "⣿", "┊", "•", "│", "漢"]
"""One cell each, and one of two cells. No combining mark: a chart's text never holds one (``one_cell_each``
replaces it), and Textual's own wrapping counts it as a cell (a full row's last blank moves into the padding)."""
runs = st.lists(st.tuples(st.lists(st.sampled_from(CHARACTERS), min_size=1, max_size=8).map("".join),
                          st.one_of(st.none(), styles, st.sampled_from(["dim", "bold red", "on blue", "repr.number"]))), max_size=12)


CASES = ((12, 5, False, None), (40, 9, True, None), (77, 18, False, 1000), (160, 40, True, 1000), (160, 40, False, None))
"""(width, height, log scale, cursor step): the smallest chart, a narrow one, a middling one with a cursor, a wide one."""


def look(style: Style | None) -> tuple[object, ...]:
    """What a style shows: its colours and attributes (``False`` and unset alike, a colour's name and number alike)."""
    style = style or Style()
    color = lambda c: (c.type, c.number, c.triplet) if c is not None else None  # noqa: E731 - "red" and "color(1)" alike
    return (color(style.color), color(style.bgcolor), bool(style.bold), bool(style.dim), bool(style.italic), bool(style.underline),
            bool(style.reverse), bool(style.strike))


def cells(strips: list[Strip]) -> list[list[tuple[str, tuple[object, ...], object]]]:
    """Each strip as (character, what its style shows, the offset text selection reads there) per cell; a blank's
    offset aside (Textual moves blanks at the end of a full row into its padding, which has none)."""
    rows = []
    for strip in strips:
        row = []
        for segment in strip:  # a segment's style is looked at once, not once per character
            shown, offset = look(segment.style), segment.style.meta.get("offset") if segment.style else None
            row.extend((char, shown, offset if char.strip() else None) for char in segment.text)
        rows.append(row)
    return rows


def textual_strips(widget: MetricChart, text: Text, width: int, height: int) -> list[Strip]:
    """What Textual draws for ``text`` in ``widget`` at ``width`` x ``height`` (the rows after the text's
    last one blank in the widget's style, as Textual's styles cache fills them)."""
    strips = Visual.to_strips(widget, visualize(widget, text), width, height, widget.visual_style, pad=True)
    return strips + [Strip.blank(width, widget.visual_style.rich_style)] * (height - len(strips))


@pytest.mark.parametrize("run", ["lr-too-high", "overfitting"])
async def test_every_chart_draws_as_textual_draws_its_text(run: str) -> None:
    """Every chart of a demo run, at sizes from the smallest to wide, linear and log, with and without a
    cursor: the strips are Textual's, cell for cell."""
    app = TuidiagApp(ROOT / "demo_runs" / run)
    async with app.run_test(size=(100, 30)) as pilot:
        while not (isinstance(app.screen, RunScreen) and app.screen.detail is not None):
            await pilot.pause(0.05)
        widget = app.screen.query_one("#chart-loss", MetricChart)
        base, theme = widget.visual_style, app.ansi_theme
        compared = 0
        for chart in app.screen.detail.charts.values():
            for width, height, log, cursor in CASES:
                text = draw_chart(chart, log=log, marker=None, width=width, height=height, cursor=cursor)
                assert cells(text_strips(text, base, width, height, theme, app.console.get_style)) == cells(textual_strips(widget, text, width, height))
                compared += 1
        assert compared == len(app.screen.detail.charts) * len(CASES)


@pytest.mark.parametrize("run", ["vanishing-gradients", pytest.param("lr-too-high", marks=full_only)])
async def test_every_layer_heatmap_draws_as_textual_draws_its_text(run: str) -> None:
    """The layers tab's heatmap of a demo run, drawn as the widget draws it (two columns narrower than itself), at
    sizes from narrow (the legend on several lines, layers scrolled) to wide: the strips are Textual's, cell for
    cell. (Below about 30 columns a layer's name and four cells no longer fit: Textual wraps such a row, the
    strips cut it.)"""
    app = TuidiagApp(ROOT / "demo_runs" / run)
    async with app.run_test(size=(100, 30)) as pilot:
        while not (isinstance(app.screen, RunScreen) and app.screen.detail is not None):
            await pilot.pause(0.05)
        await pilot.press("5")
        widget = app.screen.query_one("#layer-grid", LayerHeatmap)
        base, theme = widget.visual_style, app.ansi_theme
        for width, height in ((30, 8), (50, 12), (77, 18), (160, 40)):
            for top in (0, 2):
                text = render_grid(app.screen.detail.layers, max(10, width - 2), height=height, top=top)
                strips = text_strips(text, base, width, height, theme, app.console.get_style)
                assert strips is not None, (width, height)  # the heatmap takes the fast path
                assert cells(strips) == cells(textual_strips(widget, text, width, height)), (width, height, top)


def _rows_of(row_runs: list[list[tuple[str, object]]]) -> list[Text]:
    """One ``Text`` per generated row, each run appended in its style."""
    rows = []
    for parts in row_runs:
        row = Text()
        for part, style in parts:
            row.append(part, style)
        rows.append(row)
    return rows


@settings(max_examples=examples(100), deadline=None)
@given(row_runs=st.lists(runs, min_size=1, max_size=4), own=st.lists(st.tuples(styles, st.integers(0, 3)), max_size=3),
       narrower=st.integers(0, 3))
def test_rows_whose_spans_overlap_or_that_do_not_fit_are_left_to_textual(
        row_runs: list[list[tuple[str, object]]], own: list[tuple[Style, int]], narrower: int) -> None:
    """A row appended as a ``Text`` with a style of its own carries a span over its other spans: made into strips run
    by run, one of the two styles would be lost. A row wider than the widget would be cut (Textual wraps it). Such
    text is left to Textual (None); any other is made into strips."""
    rows = _rows_of(row_runs)
    overlapping = False
    for style, index in own:
        if index < len(rows) and len(rows[index].spans) > 0 and rows[index].plain:
            rows[index] = Text().append(Text(rows[index].plain, style=style, spans=list(rows[index].spans)))
            overlapping |= bool(style)  # a null style adds no span
    text = Text("\n").join(rows)
    width = max(1, max(row.cell_len for row in rows) - narrower)
    drawn = text_strips(text, TextualStyle(), width, len(rows), get_style=Console().get_style)  # named styles too
    assert (drawn is None) == (overlapping or any(row.cell_len > width for row in rows))


class OneChart(App):
    """One chart alone in an app: nothing but the test sets what it shows."""

    def compose(self) -> ComposeResult:
        yield MetricChart(id="chart")


async def test_generated_rows_draw_as_textual_draws_them() -> None:
    """Rows of generated runs of text in string and named styles, wide characters and short rows, drawn in
    a chart's style: the strips are Textual's, cell for cell."""
    app = OneChart()
    async with app.run_test(size=(100, 30)):
        widget = app.query_one("#chart", MetricChart)
        base, theme = widget.visual_style, app.ansi_theme

        @settings(max_examples=examples(150), deadline=None)
        @given(row_runs=st.lists(runs, min_size=1, max_size=4), extra=st.integers(0, 5))
        def generated(row_runs: list[list[tuple[str, object]]], extra: int) -> None:
            rows = _rows_of(row_runs)
            text = Text("\n").join(rows)
            width = max(1, max(row.cell_len for row in rows)) + extra  # a chart's rows fit it (Textual wraps longer ones)
            height = len(rows) + 1
            assert cells(text_strips(text, base, width, height, theme, app.console.get_style)) == cells(textual_strips(widget, text, width, height))

        generated()


async def test_a_failed_chart_is_drawn_by_textual_with_its_error_in_its_place() -> None:
    """A chart that cannot be drawn shows its error (a ``Text`` with a style of its own, which the strips
    leave to Textual): the whole message, never read as markup, and the app stays up. The chart is alone
    in an app of its own, so no refresh of a run replaces what it was given."""
    from tuidiag.app.widgets.guard import failure_text

    assert text_strips(failure_text("this chart", ValueError("x")), TextualStyle(), 60, 3) is None
    app = OneChart()
    async with app.run_test(size=(120, 30)) as pilot:
        chart = app.query_one("#chart", MetricChart)
        chart.show(Chart("loss", (("loss", "[bold]not markup[/]", None),)))  # type: ignore[arg-type]
        await pilot.pause()
        shown = "\n".join(chart.render_line(y).text for y in range(chart.size.height))
        assert "this chart could not be drawn: ValueError" in shown and "'[bold]not markup[/]'" in shown.replace("\n", "")
        assert "the monitor keeps running" in shown
        assert app.is_running


async def test_a_selection_in_a_chart_is_highlighted_as_textual_highlights_it() -> None:
    """While text in a chart is selected, each row is what Textual draws (with the selection's style);
    once the selection is cleared, the chart's own strips again."""
    import numpy as np
    from textual.geometry import Offset
    from textual.selection import Selection
    from textual.widget import Widget

    app = OneChart()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one("#chart", MetricChart)
        steps = np.arange(200.0)
        chart.show(Chart("loss", (("train", steps, np.exp(-steps / 50) + 0.1 * np.sin(steps)),)))
        await pilot.pause()
        plain = [cells([chart.render_line(y)]) for y in range(chart.size.height)]
        app.screen.selections = {chart: Selection(Offset(0, 2), Offset(20, 4))}
        chart.refresh()
        await pilot.pause()
        selected = [cells([chart.render_line(y)]) for y in range(chart.size.height)]
        assert selected == [cells([Widget.render_line(chart, y)]) for y in range(chart.size.height)]
        assert selected[3] != plain[3] and selected[10] == plain[10]  # the selected rows highlighted, the others as drawn
        app.screen.selections = {}
        chart.refresh()
        await pilot.pause()
        assert [cells([chart.render_line(y)]) for y in range(chart.size.height)] == plain
