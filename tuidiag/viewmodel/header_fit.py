"""Fitting a one-line header to the terminal's width: whole figures or none, never a number cut short.

The run view's title (``name | status | step N``) and its system strip (``steps/s 173   data wait 6%``)
are one line each. Where the line is too narrow, the run's name is elided with ``…`` and figures
are left out whole, marked by a trailing ``…``: a value is never shown cut (``step 1,49`` for
``step 1,499``).
"""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
FIGURE_GAP = 3
"""Spaces after each figure of the system strip."""


def elide(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: whole, or cut with a trailing ``…`` ("" below one character)."""
    if len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS if width >= 1 else ""


def fit_figures(figures: Sequence[tuple[str, str]], width: int, gap: int = FIGURE_GAP) -> tuple[tuple[tuple[str, str], ...], bool]:
    """The leading ``(label, value)`` figures that fit whole in ``width`` cells, each written ``label value``
    then ``gap`` spaces (the last one's spaces may be cut), and whether any was left out (a ``…`` then
    needs one more cell, which is kept free)."""
    used, shown = 0, []
    for index, (label, value) in enumerate(figures):
        size = len(label) + 1 + len(value)
        room = width - used - (0 if index == len(figures) - 1 else 1)  # a cell for the "…" if more follow
        if size > room:
            return tuple(shown), True
        shown.append((label, value))
        used += size + gap
    return tuple(shown), False


def title_name_width(name: str, rest: str, width: int, least: int = 4) -> int:
    """Characters of the run's ``name`` shown before ``rest`` (`` | status | step N``) in ``width`` cells:
    the whole name where it fits, else what is left (at least ``least``, the rest of the line then elided)."""
    return max(min(len(name), least), min(len(name), width - len(rest)))
