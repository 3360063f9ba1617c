"""The numpy drawing of a figure's lines and scatters gives exactly plotext's cells (``plot_raster``).

Each generated figure is built twice from one printable spec: once by ``figure_rows`` (signals drawn
by numpy) and once by plotext's own ``build``, parsed back from its ANSI text; the rows must be equal,
character, colour and style. The generator aims at what differs between two implementations:
points exactly on a cell boundary or a rounding edge of plotext's scaling, points off the canvas,
repeated points, one-point lines, steep and flat segments, braille beside character markers, and
later signals over earlier ones.
"""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.text import Text
from textual_plotext.plot import Plot

from tests.conftest import examples
from tuidiag.app.widgets.plot_raster import BRAILLE_CHARS, take_signals
from tuidiag.app.widgets.plot_rows import figure_rows

MARKERS = ("braille", "•", "+", "x", "┊")
COLORS = ((0, 175, 215), (255, 135, 0), "red", "white", "blue+")


def coordinate(cells: int) -> st.SearchStrategy[float]:
    """A unit coordinate: anywhere, on a point boundary of a canvas of up to ``cells`` cells, or a hair
    either side of one (plotext rounds to 8 decimals before flooring)."""
    on_grid = st.integers(1, 4 * cells).flatmap(lambda n: st.integers(-n, 2 * n).map(lambda k: k / n))  # in [-1, 2]
    hair = st.builds(lambda v, e: v + e, on_grid, st.sampled_from([-1e-9, -1e-12, 1e-12, 1e-9, 5e-9]))
    return st.one_of(st.floats(-0.6, 1.6, allow_nan=False), on_grid, hair, st.sampled_from([0.0, 1.0, 0.5]))


@st.composite
def specs(draw: st.DrawFn) -> dict:
    """What a figure holds, printable when a test fails: its size, theme, series (kind, points, marker,
    colour), and the optional threshold and marker lines."""
    width, height = draw(st.integers(4, 40)), draw(st.integers(4, 16))
    series = []
    for _ in range(draw(st.integers(1, 4))):
        count = draw(st.integers(1, 30))
        x = draw(st.lists(coordinate(width), min_size=count, max_size=count))
        y = draw(st.lists(coordinate(height), min_size=count, max_size=count))
        if draw(st.booleans()):
            x = sorted(x)  # a chart's line goes left to right; a scatter or a cursor need not
        series.append((draw(st.sampled_from(["plot", "scatter"])), x, y, draw(st.sampled_from(MARKERS)), draw(st.sampled_from(COLORS))))
    return {"size": (width, height), "theme": draw(st.sampled_from(["default", "dark", "clear", "pro"])), "series": series,
            "hline": draw(st.one_of(st.none(), st.floats(0.0, 1.0))), "vline": draw(st.one_of(st.none(), st.floats(0.0, 1.0)))}


def build(spec: dict) -> Plot:
    """A plotext figure from ``spec`` (:func:`specs`), with set limits and ticks as a chart sets them."""
    plot = Plot()
    plot.plotsize(*spec["size"])
    plot._set_size(*spec["size"])
    plot.theme(spec["theme"])
    for kind, x, y, marker, color in spec["series"]:
        getattr(plot, kind)(x, y, marker=marker, color=color)
    if spec["hline"] is not None:
        plot.horizontal_line(spec["hline"], color="red")
    if spec["vline"] is not None:
        plot.vertical_line(spec["vline"], color="green")
    plot.xlim(0.0, 1.0)
    plot.ylim(0.0, 1.0)
    plot.xticks([0.0, 0.5, 1.0], ["", "", ""])
    plot.yticks([0.0, 1.0], ["", ""])
    return plot


def plotext_rows(figure: Plot) -> list[Text]:
    """plotext's own drawing of ``figure``, parsed back from its ANSI text."""
    return list(Text.from_ansi(figure.build().removesuffix("\n")).split("\n"))


@settings(max_examples=examples(150), deadline=None)
@given(spec=specs())
def test_numpy_drawn_signals_are_plotexts_cells(spec: dict) -> None:
    """Every generated figure draws the same rows by numpy as by plotext, and numpy drew its signals."""
    assert take_signals(build(spec).monitor) is not None  # the numpy path is the one compared
    assert figure_rows(build(spec)) == plotext_rows(build(spec))


def test_a_spiky_envelope_draws_every_column_as_plotext_does() -> None:
    """The named case: a min/max envelope from the bottom to the top at every column, three series deep."""
    rng = np.random.default_rng(0)
    figure = Plot()
    figure.plotsize(156, 18)
    figure._set_size(156, 18)
    for marker, color in zip(("braille", "•", "+"), COLORS):
        x = np.repeat(np.linspace(0.0, 1.0, 125), 2)
        y = np.where(np.arange(250) % 2, rng.uniform(0.6, 1.0, 250), rng.uniform(0.0, 0.4, 250))
        figure.plot(x.tolist(), y.tolist(), marker=marker, color=color)
    figure.xlim(0.0, 1.0)
    figure.ylim(0.0, 1.0)
    figure.xticks([0.0, 0.25, 0.5, 0.75, 1.0], [""] * 5)
    figure.yticks([0.0, 0.5, 1.0], [""] * 3)
    twin = copy.deepcopy(figure)
    assert take_signals(copy.deepcopy(figure).monitor) is not None
    rows = figure_rows(figure)
    assert rows == plotext_rows(twin)
    assert sum(row.plain.count("•") for row in rows) > 100  # the drawing is dense: every column crossed


@example(kind="log")
@given(kind=st.sampled_from(["log", "no limits", "no ticks", "fill", "hd marker", "upper axis", "label", "text"]))
def test_what_numpy_does_not_draw_is_left_to_plotext(kind: str) -> None:
    """A figure this module does not handle is built by plotext alone, with the same result as before."""
    figure = Plot()
    figure.plotsize(40, 12)
    figure._set_size(40, 12)
    x, y = [0.1, 0.5, 0.9], [1.0, 10.0, 100.0]
    options: dict[str, object] = {"marker": "hd" if kind == "hd marker" else "braille", "color": "red"}
    if kind == "fill":
        options["fillx"] = True
    if kind == "upper axis":
        options["xside"] = "upper"
    if kind == "label":
        options["label"] = "loss"  # plotext's legend reads the signal's markers
    figure.plot(x, y, **options)
    if kind == "log":
        figure.yscale("log")
    if kind == "text":
        figure.text("HELLO", 0.4, 50.0)  # plotext draws text over the signals
    if kind != "no limits":
        figure.xlim(0.0, 1.0)
        figure.ylim(1.0, 100.0)
    if kind != "no ticks":
        figure.xticks([0.0, 1.0], ["", ""])
        figure.yticks([1.0, 100.0], ["", ""])
    twin = copy.deepcopy(figure)
    assert take_signals(copy.deepcopy(figure).monitor) is None
    assert figure_rows(figure) == plotext_rows(twin)


def test_the_braille_table_is_plotexts_own() -> None:
    """Each dot code maps to plotext's character for it: no dots is a blank, all eight the full cell."""
    assert BRAILLE_CHARS[0] == " " and BRAILLE_CHARS[255] == "⣿"
    assert len(set(BRAILLE_CHARS.tolist())) > 250  # plotext's table has a few duplicates; kept as they are


@settings(max_examples=examples(600), deadline=None)
@given(data=st.data(), bins=st.integers(1, 800), lim=st.sampled_from([(0.0, 1.0), (-0.5, 2.0), (1e-3, 3e-3)]))
def test_points_round_as_plotexts_get_matrix_data(data: st.DataObject, bins: int, lim: tuple[float, float]) -> None:
    """The scaling to canvas points is plotext's ``get_matrix_data``, rounding included: values anywhere, on a
    point, and where the scaled value is a half at the 9th decimal or a hair from one (plotext rounds half up
    with its own ``round``; Python's rounds to even, and numpy's differs from both)."""
    from plotext import _utility as plotext_utility

    from tuidiag.app.widgets.plot_raster import _points

    lo, hi = lim
    edge = st.builds(lambda k, e: lo + (k - 0.5 + e) * (hi - lo) / max(1, bins - 1), st.integers(-2, bins + 2),
                     st.sampled_from([0.0, -5e-9, 5e-9, -5e-9 + 1e-17, 5e-9 - 1e-17, 1e-12, -1e-12, 0.5, 0.5 - 5e-9]))
    values = data.draw(st.lists(st.one_of(coordinate(200).map(lambda v: lo + v * (hi - lo)), edge), min_size=1, max_size=50))
    assert _points(np.array(values), list(lim), bins).tolist() == plotext_utility.get_matrix_data(values, list(lim), bins)


def test_a_control_character_in_a_cell_does_not_shift_the_colours_after_it() -> None:
    """rich drops control codes from a row's text; the runs after one keep their own colours."""
    figure = Plot()
    figure.plotsize(30, 8)
    figure._set_size(30, 8)
    figure.scatter([0.2], [0.5], marker="\a", color="blue")
    figure.scatter([0.8], [0.5], marker="x", color="red")
    figure.xlim(0.0, 1.0)
    figure.ylim(0.0, 1.0)
    figure.xticks([0.0, 1.0], ["", ""])
    figure.yticks([0.0, 1.0], ["", ""])
    row = next(row for row in figure_rows(figure) if "x" in row.plain)
    assert "\a" not in row.plain and len(row.plain) == 29
    at = row.plain.index("x")
    assert any(span.start <= at < span.end and span.style.color.number == 1 for span in row.spans)  # red
