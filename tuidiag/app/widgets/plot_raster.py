"""A plotext figure's data drawn with numpy: the same cells plotext's own build puts on its canvas,
without its Python loop over every point of every line.

plotext draws a line by listing every canvas point between two data points, then, for braille
markers, grouping the points into cells with a dictionary per cell: pure Python per point. On a
spiky run, whose min/max envelope runs from the bottom of the chart to the top at every column,
the update ratio's chart (three series, 96 x 43 cells) took 110 ms, 8 ms here
(``benchmarks/chart_draw_cost.py``), and the first visit of a tab draws its chart. Here :func:`take_signals` lifts a figure's lines and
scatters out of its monitor before plotext builds the frame, ticks and marker lines, and
:func:`draw_signals` puts them on the built matrix, in plotext's order and with plotext's
arithmetic: the same scaling and rounding to points (``get_matrix_data``), the same points between
two data points (``get_line``), the same braille characters (plotext's own table), the same clipping
to the canvas. ``tests/test_plot_raster.py`` compares the two over generated figures.

A figure this module does not handle (a signal on a non-default axis side, with fill, hd markers, a
label for a legend, a non-finite or huge coordinate; text drawn over the signals; log or reversed axes;
limits or ticks plotext takes from the data) is left to plotext: :func:`take_signals` then takes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from plotext import _utility as plotext_utility

BRAILLE = "braille"
CELL_DOTS = {BRAILLE: (2, 4)}
"""Points per cell across and down, by marker (any other single-character marker: one)."""
FARTHEST = 64.0
"""A coordinate further than this many plot widths from the limits is left to plotext: a line to it would
list millions of points (the chart clips its coordinates to the plot, so it never sends one)."""


ROUND_UP, ROUND_DOWN = 10 ** 8, 10 ** (-8)
"""plotext's scaling rounds to 8 decimals with these factors (its ``_utility.round``, not Python's)."""


def _braille_chars() -> np.ndarray:
    """plotext's braille character for each 8-bit dot code: bit ``(3 - row) * 2 + column`` is the
    dot ``column`` across and ``row`` up, as plotext orders a cell's dots (its table, quirks kept)."""
    chars = []
    for code in range(256):
        chars.append(plotext_utility.get_hd_marker(tuple((code >> bit) & 1 for bit in range(8))))
    return np.array(chars, dtype=object)


BRAILLE_CHARS = _braille_chars()


@dataclass(frozen=True)
class Signal:
    """One line or scatter as plotext stored it: unit-free coordinates, one marker, colour and style."""

    x: np.ndarray
    y: np.ndarray
    marker: str
    color: object
    style: object
    lines: bool


def take_signals(monitor: object) -> list[Signal] | None:
    """The monitor's signals, removed from it (it then builds the frame and marker lines alone);
    None, with the monitor untouched, when a signal is one plotext must draw itself or the limits
    and ticks are not all set (plotext takes those from the data)."""
    m = monitor
    limits = (m.xlim[0], m.ylim[0])  # type: ignore[attr-defined]
    if any(None in lim or not float(lim[1]) > float(lim[0]) for lim in limits) or m.xticks[0] is None or m.yticks[0] is None:  # type: ignore[attr-defined]
        return None
    if any(label is not None for label in m.label) or m.text:  # type: ignore[attr-defined]  # a legend reads the markers; text goes over signals
        return None
    if (m.xscale[0] == m.default.xscale[1] or m.yscale[0] == m.default.yscale[1]  # type: ignore[attr-defined]
            or m.xdirection[0] != 1 or m.ydirection[0] != 1):  # type: ignore[attr-defined]  # log or reversed axes
        return None
    signals: list[Signal] = []
    for s in range(m.signals):  # type: ignore[attr-defined]
        markers, colors, styles = m.marker[s], m.color[s], m.style[s]  # type: ignore[attr-defined]
        if (m.xside[s] != m.default.xside[0] or m.yside[s] != m.default.yside[0]  # type: ignore[attr-defined]
                or m.fillx[s] is not False or m.filly[s] is not False  # type: ignore[attr-defined]
                or any(v != markers[0] for v in markers) or any(v != colors[0] for v in colors)
                or any(v != styles[0] for v in styles)):
            return None
        marker = markers[0] if markers else " "
        if marker != BRAILLE and len(marker) != 1:  # hd, fhd and named markers
            return None
        try:
            x = np.asarray(m.x[s], dtype=float)  # type: ignore[attr-defined]
            y = np.asarray(m.y[s], dtype=float)  # type: ignore[attr-defined]
        except (TypeError, ValueError):  # dates or text: plotext's
            return None
        if x.shape != y.shape or x.ndim != 1 or not all(_near(v, lim) for v, lim in zip((x, y), limits)):
            return None
        signals.append(Signal(x, y, marker, colors[0] if colors else None, styles[0] if styles else None, bool(m.lines[s])))  # type: ignore[attr-defined]
    for s in range(m.signals):  # type: ignore[attr-defined]
        for field in ("x", "y", "marker", "color", "style"):
            getattr(m, field)[s] = []
    return signals


def draw_signals(monitor: object, signals: list[Signal]) -> None:
    """Put ``signals`` on the monitor's built matrix, each over the ones before it, as plotext would
    have (a figure whose limits plotext took from the data must not come here: only set limits)."""
    matrix = monitor.matrix  # type: ignore[attr-defined]
    cols, rows = matrix.Cols_canvas, matrix.Rows_canvas
    width, height = len(cols), len(rows)
    if width <= 0 or height <= 0:
        return
    xlim, ylim = monitor.xlim[0], monitor.ylim[0]  # type: ignore[attr-defined]
    for signal in signals:
        across, down = CELL_DOTS.get(signal.marker, (1, 1))
        px = _points(signal.x, xlim, width * across)
        py = _points(signal.y, ylim, height * down)
        if signal.lines:
            px, py = _joined(px, py)
        cx, cy = px // across, py // down
        inside = (cx >= 0) & (cx < width) & (cy >= 0) & (cy < height)
        if signal.marker == BRAILLE:
            bit = (down - 1 - py[inside] % down) * across + px[inside] % across
            codes = np.zeros(width * height, dtype=np.int64)
            np.bitwise_or.at(codes, cy[inside] * width + cx[inside], 1 << bit)
            where = np.flatnonzero(codes)
            cells = zip((where % width).tolist(), (where // width).tolist(), BRAILLE_CHARS[codes[where]].tolist())
        else:
            hit = np.zeros(width * height, dtype=bool)  # not np.unique: it imports numpy.ma (20 ms, once)
            hit[cy[inside] * width + cx[inside]] = True
            where = np.flatnonzero(hit)
            cells = ((c, r, signal.marker) for c, r in zip((where % width).tolist(), (where // width).tolist()))
        markers, colors, styles = matrix.marker, matrix.fullground, matrix.style
        for c, r, char in cells:  # what matrix.insert_element does, for cells known to be on the canvas
            col, row = cols.start + c, rows.start + r
            markers[row][col] = char
            if signal.color is not None:
                colors[row][col] = signal.color
            if signal.style is not None:
                styles[row][col] = signal.style


def _near(values: np.ndarray, lim: list[float]) -> bool:
    """All ``values`` finite and within :data:`FARTHEST` plot widths of ``lim``."""
    lo, hi = float(lim[0]), float(lim[1])
    return bool(np.isfinite(values).all() and (not len(values) or np.abs((values - lo) / (hi - lo)).max() <= FARTHEST))


def _points(values: np.ndarray, lim: list[float], bins: int) -> np.ndarray:
    """plotext's ``get_matrix_data``: ``floor(round(0.5 + (bins - 1) * (v - lo) / (hi - lo), 8))`` with
    plotext's own ``round`` (half up: ``n * 10**8``, its floor or its ceiling, times ``10**-8``), each step
    the same floating-point operation plotext does."""
    lo, hi = float(lim[0]), float(lim[1])
    scaled = 0.5 + (bins - 1) * (values - lo) / (hi - lo)
    n = scaled * ROUND_UP
    f = np.floor(n)
    return np.floor(np.where(n - f < 0.5, f, np.ceil(n)) * ROUND_DOWN).astype(np.int64)


def _joined(px: np.ndarray, py: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """plotext's ``get_lines`` on integer points: each segment's points from its start, stepped by at
    most one point on either axis (``int`` of a linear ramp), then the last data point."""
    if len(px) < 2:
        return px, py
    x0, y0, dx, dy = px[:-1], py[:-1], np.diff(px), np.diff(py)
    steps = np.maximum(np.abs(dx), np.abs(dy))  # points per segment, less its end
    seg = np.repeat(np.arange(len(steps)), steps)
    starts = np.cumsum(steps) - steps
    i = (np.arange(int(steps.sum())) - np.repeat(starts, steps)).astype(float)
    slope_x = np.divide(dx, steps, out=np.zeros(len(dx)), where=steps > 0)
    slope_y = np.divide(dy, steps, out=np.zeros(len(dy)), where=steps > 0)
    xs = np.trunc(x0[seg] + i * slope_x[seg]).astype(np.int64)
    ys = np.trunc(y0[seg] + i * slope_y[seg]).astype(np.int64)
    return np.append(xs, px[-1]), np.append(ys, py[-1])
