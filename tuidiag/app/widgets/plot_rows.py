"""A plotext figure's rows as rich ``Text``, read from its matrix: the same text and styles as
``Text.from_ansi(figure.build())``, without writing the ANSI string and parsing it back.

plotext builds a character matrix (markers, foreground, style and background colours per cell),
then writes it as one string with an escape sequence at every change of colours, which rich
parses again; for a chart of 100 x 40 cells the writing and the parsing took about a third of
the drawing. Here each run of cells of the same colours becomes one span, with the style that
rich's decoder gives that run's escape sequence (computed once per colour triple and kept), so
the rows are equal to the parsed ones (``tests/test_chart_render.py`` compares them).
"""

from __future__ import annotations

from functools import lru_cache

from plotext import _utility as plotext_utility
from rich.ansi import AnsiDecoder
from rich.style import Style
from rich.text import Span, Text

from tuidiag.app.widgets.plot_raster import draw_signals, take_signals


@lru_cache(maxsize=1024)
def _style_of(colors: tuple[object, ...]) -> Style | None:
    """The style rich's decoder gives a run that plotext writes with ``colors`` (foreground, style, background)."""
    ansi = plotext_utility.colors_to_ansi(*colors)
    decoded = AnsiDecoder().decode_line(ansi + "x" + plotext_utility.ansi_end)
    return decoded.spans[0].style if decoded.spans else None  # type: ignore[return-value]


def figure_rows(figure: object) -> list[Text]:
    """Build ``figure`` (a plotext figure) and return its rows, top first, each as the ``Text`` that
    ``Text.from_ansi(figure.build().removesuffix("\\n")).split("\\n")`` gives."""
    figure._set_sizes()  # type: ignore[attr-defined]  # what Figure.build does, less writing the canvas
    monitor = figure.monitor  # type: ignore[attr-defined]
    signals = take_signals(monitor)
    figure._build_matrix()  # type: ignore[attr-defined]
    if signals:
        draw_signals(monitor, signals)  # the lines and scatters, as plotext would have drawn them
    matrix = monitor.matrix
    rows = []
    for r in matrix.Rows[::-1]:
        markers, fore, style, back = matrix.marker[r], matrix.fullground[r], matrix.style[r], matrix.background[r]
        runs: list[tuple[int, int, Style | None]] = []  # cells of the same colours, one span each (not Text.append: slower)
        start, cols = 0, len(markers)
        for c in range(1, cols + 1):
            if c == cols or (fore[c], style[c], back[c]) != (fore[start], style[start], back[start]):
                runs.append((start, c, _style_of((fore[start], style[start], back[start]))))
                start = c
        text = Text("".join(markers), spans=[Span(a, b, s) for a, b, s in runs if s is not None])
        if len(text.plain) != cols:  # a cell of more or less than one character, or a control code rich drops
            text = Text()
            for a, b, s in runs:
                text.append("".join(markers[a:b]), s)
        rows.append(text)
    return rows
