"""Charts draw any data at any size, in either scale, as often as asked (hypothesis).

The monitor crashed on a terminal resize with a log-scale chart on screen: plotext
applies its log scale to its stored data while building, so the second build of a
figure took the log of a log. Charts are now drawn by a fresh figure from unit
coordinates computed on copies; these tests throw arbitrary arrays (NaN, inf,
negative, zero, 1e300, 1e-300, subnormal, constant, empty, one point) and
sequences of sizes at the drawing function and at the axis computation.
"""

from __future__ import annotations

import copy
import math
import os

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from tests.chart_helpers import label_value
from tuidiag.app.widgets.chart import draw_chart
from tuidiag.viewmodel.chart_axes import plot_data
from tuidiag.viewmodel.snapshot import Chart

EXAMPLES = int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", "30"))
"""Drawings per run of the test; TUIDIAG_FUZZ_EXAMPLES=1000 for a longer campaign (the axes get 8x as many)."""
DRAW = settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
AXES = settings(max_examples=8 * EXAMPLES, deadline=None, derandomize=True)

SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e300, -1e300, 1e-300, -1e-300, 5e-324, 1.7976931348623157e308]
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(SPECIAL))
steps = st.one_of(st.integers(-(2**62), 2**62).map(float), st.integers(0, 10_000).map(float), st.sampled_from(SPECIAL))


@st.composite
def lines(draw) -> tuple[str, np.ndarray, np.ndarray]:
    n = draw(st.integers(0, 40))
    kind = draw(st.sampled_from(["any", "constant", "positive", "steps"]))
    if kind == "constant":
        y = [draw(values)] * n
    elif kind == "positive":
        y = draw(st.lists(st.floats(min_value=5e-324, max_value=1.7976931348623157e308), min_size=n, max_size=n))
    else:
        y = draw(st.lists(values, min_size=n, max_size=n))
    x = list(range(n)) if kind == "steps" else draw(st.lists(steps, min_size=n, max_size=n))
    return draw(st.text(max_size=40)), np.array(x, dtype=np.float64), np.array(y, dtype=np.float64)


charts = st.builds(
    Chart,
    title=st.text(max_size=80),
    lines=st.lists(lines(), max_size=4).map(tuple),
    nonfinite_steps=st.lists(st.integers(-(2**62), 2**62), max_size=3).map(tuple),
    threshold=st.one_of(st.none(), values),
    log_default=st.booleans(),
    actions=st.lists(st.integers(0, 10**6), max_size=3).map(tuple),
)
sizes = st.tuples(st.integers(20, 300), st.integers(8, 100))


def _assert_drawn(text, width: int, height: int) -> None:
    rows = text.plain.split("\n")
    assert len(rows) == height and all(cell_len(row) == width for row in rows), (width, height, [cell_len(r) for r in rows])


@DRAW
@given(chart=charts, resizes=st.lists(sizes, min_size=1, max_size=3), marker=st.one_of(st.none(), st.integers(-10, 10**6)))
@example(  # the case: a loss spanning 30 decades, drawn in log scale, then the terminal resized
    chart=Chart("loss", (("train", np.arange(255.0), np.logspace(-1, 32, 255)),), (254,), log_default=True),
    resizes=[(120, 40), (80, 24), (120, 40)], marker=None,
)
@example(  # names from run files: wide and zero-width characters, markup, escapes
    chart=Chart("\u6f22\u5b57 [b]x[/b] \x1b[31m", (("e\u0301\u6f22" * 20, np.arange(3.0), np.ones(3)),), threshold=1.0),
    resizes=[(20, 8)], marker=1,
)
def test_any_chart_draws_at_any_size_in_both_scales(chart: Chart, resizes: list[tuple[int, int]], marker: int | None) -> None:
    before = copy.deepcopy(chart.lines)
    first: dict[tuple[int, int, bool], str] = {}
    for width, height in resizes + resizes[:1]:  # back to the first size: the same drawing as the first time
        for log in (True, False):
            text = draw_chart(chart, log=log, marker=marker, width=width, height=height)
            _assert_drawn(text, width, height)
            assert first.setdefault((width, height, log), text.plain) == text.plain
    for (_, x0, y0), (_, x1, y1) in zip(before, chart.lines):  # drawing never changes the data it was given
        assert np.array_equal(x0, x1, equal_nan=True) and np.array_equal(y0, y1, equal_nan=True)


@AXES
@given(chart=charts, log=st.booleans(), marker=st.one_of(st.none(), st.integers(-(2**62), 2**62)),
       x_ticks=st.integers(2, 5), y_ticks=st.integers(2, 5))
def test_axes_put_everything_in_the_unit_square(chart: Chart, log: bool, marker: int | None, x_ticks: int, y_ticks: int) -> None:
    data = plot_data(chart, log, marker, x_ticks, y_ticks)
    ys = [np.asarray(y, dtype=np.float64) for _, _, y in chart.lines]
    xs = [np.asarray(x, dtype=np.float64) for _, x, _ in chart.lines]
    finite = [np.isfinite(x[: len(y)]) & np.isfinite(y[: len(x)]) for x, y in zip(xs, ys)]
    drawable = [f & (y[: len(f)] > 0) if log else f for f, y in zip(finite, ys)]
    if not any(d.any() for d in drawable):
        assert data is None
        return
    assert data is not None and len(data.lines) == len(chart.lines)
    for (_, x, y), keep in zip(data.lines, drawable):
        assert len(x) == len(y) == int(keep.sum())
        assert np.isfinite(x).all() and np.isfinite(y).all() and ((x >= 0) & (x <= 1)).all() and ((y >= 0) & (y <= 1)).all()
    assert data.hidden_nonpositive == (sum(int((f & (y[: len(f)] <= 0)).sum()) for f, y in zip(finite, ys)) if log else 0)
    assert data.dropped_nonfinite == sum(int((~f).sum()) for f in finite)
    assert data.threshold is None or 0 <= data.threshold <= 1
    assert all(0 <= position <= 1 for position, _ in data.vlines)
    for axis in (data.x_axis, data.y_axis):
        assert len(axis.ticks) == len(axis.labels) >= 1
        assert all(0 <= t <= 1 for t in axis.ticks) and list(axis.ticks) == sorted(axis.ticks)
        shown = [label_value(label) for label in axis.labels]  # labels are real numbers (250k, 1.5M), in axis order
        assert shown == sorted(shown)


def test_log_scale_hides_non_positive_values_and_says_how_many() -> None:
    chart = Chart("update ratio", (("w", np.arange(6.0), np.array([1e-3, 0.0, -2.0, 1e-2, 1e-1, 1.0])),), log_default=True)
    log = draw_chart(chart, log=True, marker=None, width=80, height=20).plain
    linear = draw_chart(chart, log=False, marker=None, width=80, height=20).plain
    assert "2 non-positive values hidden in log scale" in log and "(log)" in log
    assert "non-positive" not in linear and "(log)" not in linear
    assert "0.001" in log and "0.1" in log  # decade ticks, labelled with the real values
    assert "-2" in linear


def test_huge_tiny_and_flat_data_get_readable_labels() -> None:
    cases = ((np.array([-1.7e308, 1.7e308]), "1.70e+308"), (np.array([1e-300, 2e-300]), "2.00e-300"), (np.full(5, 3.25), "3.25"))
    for y, label in cases:
        chart = Chart("c", (("l", np.arange(float(len(y))), y),))
        text = draw_chart(chart, log=False, marker=None, width=60, height=16).plain
        assert label in text, text
    top = 1.7976931348623157e308  # 10 ** log10(top) raises OverflowError
    for y, label in ((np.full(3, top), "1.80e+308"), (np.array([1e307, top]), "1e308"), (np.array([2e307, top]), "1.00e+308")):
        text = draw_chart(Chart("c", (("l", np.arange(float(len(y))), y),)), log=True, marker=None, width=60, height=16).plain
        assert label in text and "(log)" in text, text


def test_nothing_to_draw_says_so() -> None:
    assert "no data yet" in draw_chart(None, log=False, marker=None, width=40, height=10).plain
    empty = Chart("loss", (("train", np.array([]), np.array([])),))
    assert "loss: no data yet" in draw_chart(empty, log=True, marker=None, width=40, height=10).plain
    negative = Chart("loss", (("train", np.arange(3.0), np.array([-1.0, 0.0, -3.0])),))
    assert "no positive values to draw in log scale" in draw_chart(negative, log=True, marker=None, width=60, height=10).plain
    assert "train" in draw_chart(negative, log=False, marker=None, width=40, height=10).plain
    nan = Chart("loss", (("train", np.arange(3.0), np.full(3, math.nan)),))
    assert "no finite values to draw" in draw_chart(nan, log=False, marker=None, width=40, height=10).plain


@settings(max_examples=max(10, EXAMPLES // 2), deadline=None, derandomize=True)
@given(chart=charts, size=sizes, log=st.booleans(), smoothing=st.sampled_from([0.0, 0.9]),
       theme=st.sampled_from(["default", "textual-dark", "textual-light", "dark", "clear", "pro"]),
       cursor=st.one_of(st.none(), st.integers(0, 10**6)))
def test_figure_rows_are_the_parsed_ansi_rows(chart: Chart, size: tuple[int, int], log: bool, smoothing: float, theme: str,
                                              cursor: int | None) -> None:
    """The chart's rows read from plotext's matrix (``figure_rows``) are exactly ``Text.from_ansi`` of the figure's
    ANSI output, row by row: the same characters, spans and styles (the SVG snapshots see no difference)."""
    from rich.text import Text

    from tuidiag.app.widgets import chart as chart_module
    from tuidiag.app.widgets.plot_rows import figure_rows

    compared = []
    drawn = chart_module.figure_rows

    def checked(figure):
        twin = copy.deepcopy(figure)  # a figure is built once (plotext changes it while building)
        rows = figure_rows(figure)
        assert list(Text.from_ansi(twin.build().removesuffix("\n")).split("\n")) == rows
        compared.append(len(rows))
        return rows

    chart_module.figure_rows = checked
    try:
        draw_chart(chart, log=log, marker=None, width=size[0], height=size[1], theme=theme, smoothing=smoothing, cursor=cursor)
    finally:
        chart_module.figure_rows = drawn
    data = plot_data(chart, log, None, 2, 2, smoothing=smoothing, cursor=cursor)
    assert bool(compared) == (data is not None and size[0] >= 12 and size[1] >= 5)
