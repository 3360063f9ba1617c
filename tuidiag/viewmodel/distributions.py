"""The distribution chart: one recorded distribution's quantiles over steps, as bands.

A distribution is a family of rows ``<name>/q0`` ... ``<name>/q100``
(:data:`~tuidiag.format.SUMMARY_QUANTILES`): what ``rec.log(name=tensor)`` and
``histograms_every=N`` (``dist/weight/<param>``, ``dist/grad/<param>``) record. The
chart shows one of them at a time: the median, the q25..q75 and q5..q95 bands and
the minimum and maximum, each pair of band edges in one colour and glyph. Each line
is drawn by the caller's line function (min/max buckets of the rows or of the
envelopes), so a spike of a single step stays visible on a long run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tuidiag.diagnosis.distributions import MEDIAN, distribution_label
from tuidiag.viewmodel.snapshot import Chart

DIST_CHART = "dist"
"""The key of the distribution chart in ``RunDetail.charts`` (and its tab's pane id)."""
BANDS: tuple[tuple[str, str, int], ...] = (
    ("q0", "min", 8), ("q100", "max", 8), ("q5", "q5", 4), ("q95", "q95", 4),
    ("q25", "q25", 1), ("q75", "q75", 1), (MEDIAN, "median", 0),
)
"""(quantile suffix, line label, style) of each line, drawn in this order: outer bands first, the median on top.
The style picks the chart's colour and glyph; the two edges of a band share one."""

Line = tuple[str, np.ndarray, np.ndarray]
LineOf = Callable[[str, str], "Line | None"]
"""``(metric, label) -> line``: one chart line of a metric, or ``None`` when it has nothing to draw."""


def shown_distribution(names: Sequence[str], wanted: str | None) -> str | None:
    """The distribution to show: ``wanted`` when the run has it, else the first one (``None``: the run has none)."""
    if wanted is not None and wanted in names:
        return wanted
    return names[0] if names else None


def next_distribution(names: Sequence[str], current: str | None, direction: int) -> str | None:
    """The distribution after (``direction`` 1) or before (-1) ``current`` in ``names``, wrapping around
    (the first when ``current`` is not one of them)."""
    if not names:
        return None
    if current not in names:
        return names[0]
    return names[(names.index(current) + direction) % len(names)]


def distribution_chart(names: Sequence[str], name: str | None, line_of: LineOf, nonfinite: bool = False) -> Chart:
    """The chart of distribution ``name`` (one of ``names``): its band lines from ``line_of``, titled with the
    distribution's name and its place among ``names``, and saying so when ``nonfinite`` (some of its elements
    were NaN or infinite: the quantiles are of the others). With no ``name``, an empty chart."""
    if name is None:
        return Chart("distributions", ())
    lines: list[Line] = []
    styles: list[int] = []
    for suffix, label, style in BANDS:
        found = line_of(f"{name}/{suffix}", label)
        if found is not None:
            lines.append(found)
            styles.append(style)
    place = f" ({names.index(name) + 1}/{len(names)})" if name in names and len(names) > 1 else ""
    note = "  NaN/Inf elements left out" if nonfinite else ""
    return Chart(f"{distribution_label(name)}{place}{note}", tuple(lines), styles=tuple(styles))
