"""Loss and gradient-norm charts of a multi-rank run: one rank, all ranks, or their spread.

Built once per data change on the worker thread (``RankLines``); the run view
switches between modes (``k``) by picking lines, without recomputing anything.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from tuidiag.diagnosis.rank_stats import aligned
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS
from tuidiag.viewmodel.downsample import downsample
from tuidiag.viewmodel.snapshot import Chart

RANK_METRICS = {"loss": LOSS, "grad": GRAD_NORM_TOTAL}
"""Charts that have rank modes, and the metric each shows."""
MAX_RANK_LINES = 8
"""'all ranks' draws at most this many ranks (the first ones)."""
DEFAULT = "default"
ALL = "all ranks"
SPREAD = "spread"

Line = tuple[str, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class RankLines:
    """Per chart: one downsampled line per rank, and the min/median/max across ranks."""

    ranks: tuple[int, ...]
    per_rank: dict[str, tuple[Line, ...]]
    spread: dict[str, tuple[Line, ...]]


def rank_modes(ranks: tuple[int, ...]) -> tuple[str, ...]:
    """The modes ``k`` cycles through: the default chart, all ranks, the spread, then each rank."""
    return (DEFAULT, ALL, SPREAD, *(f"rank {r}" for r in ranks))


def _spread(series: dict[int, tuple[np.ndarray, np.ndarray]], points: int) -> tuple[Line, ...]:
    """Min, median and max across ranks at the steps every rank recorded (non-finite values ignored)."""
    _, steps, values = aligned(series)
    if not len(steps):
        return ()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a step where every rank is non-finite: dropped below
        stats = (np.nanmin(values, axis=0), np.nanmedian(values, axis=0), np.nanmax(values, axis=0))
    labels = ("min", "median", "max")
    return tuple((label, *downsample(steps, stat, points)) for label, stat in zip(labels, stats, strict=True))


def rank_lines(view: RunView, points: int) -> RankLines | None:
    """The rank charts of ``view``'s run, or ``None`` for a single-rank run."""
    ranks = tuple(view.run.ranks)
    if len(ranks) < 2:
        return None
    per_rank, spread = {}, {}
    for chart, metric in RANK_METRICS.items():
        series = {r: s for r in ranks if len((s := view.series(metric, r))[0])}
        per_rank[chart] = tuple((f"rank {r}", *downsample(*series[r], points)) for r in ranks if r in series)
        spread[chart] = _spread(series, points) if len(series) > 1 else ()
    return RankLines(ranks, per_rank, spread)


def chart_for_mode(chart: Chart, lines: RankLines | None, key: str, mode: str) -> Chart:
    """``chart`` as shown in ``mode``; charts without rank modes, and single-rank runs, are unchanged."""
    if lines is None or key not in RANK_METRICS:
        return chart
    if mode == DEFAULT:
        return replace(chart, title=f"{chart.title} - rank {lines.ranks[0]} (k: ranks)")
    if mode == ALL:
        shown = lines.per_rank[key][:MAX_RANK_LINES]
        more = f", first {MAX_RANK_LINES} of {len(lines.ranks)}" if len(lines.per_rank[key]) > MAX_RANK_LINES else ""
        return replace(chart, title=f"{chart.title} - all ranks{more}", lines=shown)
    if mode == SPREAD:
        return replace(
            chart,
            title=f"{chart.title} - spread across {len(lines.ranks)} ranks (min/median/max)",
            lines=lines.spread[key],
        )
    picked = tuple(line for line in lines.per_rank[key] if line[0] == mode)
    return replace(chart, title=f"{chart.title} - {mode}", lines=picked)
