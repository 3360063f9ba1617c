"""Where a chart's tick labels go on screen, so that no two ever touch.

The chart writes its own labels around plotext's frame: y labels right-aligned in
a left margin, one per row with a free row between two, and x labels in the row
under the frame, after the axis name (``step``/``time``), each at least one space
from the next. A label that would touch another is left out together with its tick.
Coordinates in [0, 1] land on cells as plotext puts them (:func:`cell`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuidiag.viewmodel.chart_axes import Axis


def cell(position: float, cells: int) -> int:
    """The cell (0 .. cells-1) plotext draws unit coordinate ``position`` in: ``floor(0.5 + (cells-1) * p)``,
    rounded to 8 decimals first as plotext does (so 9.9999999999 counts as 10)."""
    raw = 0.5 + (cells - 1) * position
    scaled = raw * 1e8
    rounded = (math.floor(scaled) if scaled - math.floor(scaled) < 0.5 else math.ceil(scaled)) / 1e8
    return max(0, min(cells - 1, math.floor(rounded)))


@dataclass(frozen=True)
class YLabels:
    """The y ticks kept, and for each canvas row (top first) the label written left of it."""

    ticks: tuple[float, ...]
    rows: dict[int, str]
    width: int


def y_labels(axis: Axis, rows: int, min_width: int = 0) -> YLabels:
    """Labels of ``axis`` on a canvas of ``rows`` rows: a tick whose row is next to (or on) a kept
    one's is left out, so two labels always have a free row between them (ticks taken lowest first)."""
    kept: list[float] = []
    at: dict[int, str] = {}
    for tick, label in sorted(zip(axis.ticks, axis.labels)):
        row = rows - 1 - cell(tick, rows)
        if any(abs(row - other) < 2 for other in at):
            continue
        kept.append(tick)
        at[row] = label
    width = max([min_width] + [len(label) for label in at.values()])
    return YLabels(tuple(kept), at, width)


@dataclass(frozen=True)
class XLabels:
    """The x ticks kept and the row of text under the frame that names them."""

    ticks: tuple[float, ...]
    row: str


def x_labels(axis: Axis, width: int, margin: int, columns: int, name: str) -> XLabels:
    """The row under a frame that starts at column ``margin`` and holds ``columns`` canvas cells.

    ``name`` ends where the margin ends, so the row reads ``step 0  250  500``; each label is centred
    on its tick and kept inside the row; one that would come closer than one space to the one before
    is left out."""
    row = [" "] * width
    start_name = max(0, margin - len(name))
    for i, ch in enumerate(name[: margin]):
        row[start_name + i] = ch
    last_end = margin - 1 if name else margin - 2  # the corner column under the frame stays blank
    kept: list[float] = []
    for tick, label in zip(axis.ticks, axis.labels):
        column = margin + 1 + cell(tick, columns)
        start = min(max(column - (len(label) - 1) // 2, margin + 1), width - len(label))
        if start < last_end + 2 or start < 0:
            continue
        row[start : start + len(label)] = label
        last_end = start + len(label) - 1
        kept.append(tick)
    return XLabels(tuple(kept), "".join(row))
