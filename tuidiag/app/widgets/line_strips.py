"""Rows of rich ``Text`` as Textual ``Strip``s, for a widget that draws through Textual's Line API.

A widget whose ``render()`` returns ``Text`` is converted by Textual into its own ``Content``:
each span's rich style becomes a Textual style, the lines are wrapped, then rendered back to
rich segments. For a chart of 110 x 40 cells with 1,500 colour runs that round trip took 22-34 ms,
more than drawing the chart. A chart's rows are already cut to its width, so each run becomes one
segment here, in the style Textual would give it (made once per style, by Textual's own
conversion) with the run's offset, as Textual adds it: 5-8 ms for the same chart.
``tests/test_line_strips.py`` compares the strips with Textual's, cell by cell.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.strip import Strip
from textual.style import Style


def text_strip(row: Text, base: Style, width: int, y: int = 0, ansi_theme: Any = None,
               memo: dict[object, RichStyle] | None = None, get_style: Callable[[str], RichStyle] = RichStyle.parse) -> Strip:
    """``row`` (line ``y``: one line, no newline, no style of its own, spans that do not overlap) as a
    strip of exactly ``width`` cells, each run styled as Textual styles it: the widget's ``base``
    style, then the run's span taken into Textual's style with ``ansi_theme`` (the app's), and the
    run's offset in the widget (which text selection reads, and which keeps the runs apart in an
    exported screenshot; counted in characters, as Textual counts it); a shorter row is padded with
    blanks in ``base``, a longer one cut. ``memo`` keeps the styles made (a chart has a few, over a
    thousand runs); ``get_style`` reads a style given as a string (the app console's, for named styles)."""
    memo = {} if memo is None else memo
    plain, segments, at, x = row.plain, [], 0, 0

    def add(start: int, end: int, span_style: object) -> None:
        nonlocal x
        if span_style not in memo:
            memo[span_style] = (base + _textual(span_style, ansi_theme, get_style)).rich_style if span_style else base.rich_style
        text = plain[start:end]
        segments.append(Segment(text, memo[span_style] + _offset(x, y)))
        x += len(text)

    for span in sorted(row.spans, key=lambda s: s.start):
        if span.start > at:
            add(at, span.start, None)
        if span.end > max(span.start, at):
            add(max(span.start, at), span.end, span.style)
            at = span.end
    if at < len(plain):
        add(at, len(plain), None)
    return Strip(segments).adjust_cell_length(width, base.rich_style)


def _overlapping(row: Text) -> bool:
    """Whether two of ``row``'s spans cover the same character."""
    end = 0
    for span in sorted(row.spans, key=lambda s: s.start):
        if span.start < end and span.end > span.start:
            return True
        end = max(end, span.end)
    return False


@lru_cache(maxsize=1 << 15)
def _offset(x: int, y: int) -> RichStyle:
    """The metadata Textual puts on a run at cell ``x`` of line ``y`` of a widget."""
    return RichStyle.from_meta({"offset": (x, y)})


def _textual(style: object, ansi_theme: Any, get_style: Callable[[str], RichStyle]) -> Style:
    """A rich style (or a style string such as ``"dim"``, read by ``get_style``) as Textual's ``Style``."""
    rich = style if isinstance(style, RichStyle) else get_style(str(style))
    return Style.from_rich_style(rich, ansi_theme)


def text_strips(text: Text, base: Style, width: int, height: int, ansi_theme: Any = None,
                get_style: Callable[[str], RichStyle] = RichStyle.parse) -> list[Strip] | None:
    """``text`` as exactly ``height`` strips of ``width`` cells (blank strips below its last line);
    None, to leave it to Textual, for a ``Text`` with a style of its own or spans that overlap on a
    row (Textual nests them its own way: an error message, a line appended with a style of its own),
    or a row wider than ``width`` (Textual wraps it; cut here, its end would be lost: a sentence)."""
    if text.style:
        return None
    rows = text.split("\n", allow_blank=True)[:height]
    if any(row.cell_len > width or _overlapping(row) for row in rows):
        return None
    memo: dict[object, RichStyle] = {}
    strips = [text_strip(row, base, width, y, ansi_theme, memo, get_style) for y, row in enumerate(rows)]
    return strips + [Strip.blank(width, base.rich_style)] * (height - len(strips))
