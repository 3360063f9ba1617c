"""Comparing one metric across ranks: first non-finite rank, disagreement of replicated values, stragglers.

Pure functions of ``{rank: (steps, values)}`` mappings, so they are tested on
synthetic series and reused by the rules in :mod:`tuidiag.diagnosis.rules.ranks`.
"""

from __future__ import annotations

from functools import reduce

import numpy as np

from tuidiag.diagnosis.stats import median

RankSeries = dict[int, tuple[np.ndarray, np.ndarray]]
"""rank -> (steps, values) of one metric."""

REPLICA_TOLERANCE = 1e-4
"""Relative gap above which values that every replica should share (weight norms) disagree."""
STRAGGLER_RATIO = 1.5
"""A rank is a straggler when its own time is this many times the other ranks' ..."""
STRAGGLER_MIN_SECONDS = 2e-3
"""... and at least this much longer, per step (jitter of tiny CPU steps is not straggling)."""
DATA_SHARE = 0.3
"""A data straggler waits for data this share of the step longer than the other ranks."""
MIN_TIMINGS = 10
SHARDED_MARKERS = ("_fsdp", "flat_param", "_flat_param")


def _first_bad(series: tuple[np.ndarray, np.ndarray] | None) -> int | None:
    """The first step with a non-finite value, or ``None``."""
    if series is None:
        return None
    steps, values = series
    bad = ~np.isfinite(values)
    return int(steps[int(np.argmax(bad))]) if bad.any() else None


def first_nonfinite(loss: RankSeries, grads: RankSeries) -> tuple[int, int, dict[int, int | None]] | None:
    """(rank, step, other ranks' first non-finite step) when one rank turned non-finite before all others.

    A rank's onset is its first non-finite loss or gradient norm. Ranks tied at the
    earliest step are told apart by the loss: gradients are all-reduced, so one bad
    rank makes every rank's gradient non-finite at once, while only its own loss is.
    ``None`` when no rank or several ranks at once went non-finite.
    """
    ranks = sorted(set(loss) | set(grads))
    if len(ranks) < 2:
        return None
    loss_first = {r: _first_bad(loss.get(r)) for r in ranks}
    onset = {
        r: min((s for s in (loss_first[r], _first_bad(grads.get(r))) if s is not None), default=None) for r in ranks
    }
    started = {r: s for r, s in onset.items() if s is not None}
    if not started:
        return None
    earliest = min(started.values())
    tied = [r for r, s in started.items() if s == earliest]
    if len(tied) > 1:
        tied = [r for r in tied if loss_first[r] == earliest]
    if len(tied) != 1:
        return None
    rank = tied[0]
    return rank, earliest, {r: onset[r] for r in ranks if r != rank}


def aligned(series: RankSeries) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(ranks, common steps, values as ranks x steps) at the steps every rank recorded (first value per step)."""
    ranks = sorted(series)
    if ranks and _same_increasing_steps([series[r][0] for r in ranks]):  # the usual case: no sorting needed
        return ranks, series[ranks[0]][0], np.vstack([series[r][1] for r in ranks])
    uniques = {r: np.unique(series[r][0], return_index=True) for r in ranks}
    common = reduce(np.intersect1d, (u for u, _ in uniques.values())) if ranks else np.empty(0, np.int64)
    rows = []
    for r in ranks:
        steps, first_index = uniques[r]
        rows.append(series[r][1][first_index[np.searchsorted(steps, common)]])
    return ranks, common, np.vstack(rows) if rows else np.empty((0, 0))


def _same_increasing_steps(steps: list[np.ndarray]) -> bool:
    """True when every array equals the first and it is strictly increasing."""
    first = steps[0]
    return all(len(s) == len(first) and np.array_equal(s, first) for s in steps[1:]) and bool(
        np.all(np.diff(first) > 0)
    )


def norm_disagreement(
    series: RankSeries, tolerance: float = REPLICA_TOLERANCE
) -> tuple[int, float, dict[int, float]] | None:
    """(first step, relative gap at the newest common step, each rank's value there) when ranks disagree.

    Only steps where every rank has a finite value count; the gap must hold at the
    newest such step (a persistent drift, not one noisy sample).
    """
    if len(series) < 2:
        return None
    ranks, steps, values = aligned(series)
    ok = np.isfinite(values).all(axis=0)
    steps, values = steps[ok], values[:, ok]
    if not len(steps):
        return None
    scale = np.maximum(np.abs(np.median(values, axis=0)), 1e-12)
    gaps = (values.max(axis=0) - values.min(axis=0)) / scale
    if gaps[-1] <= tolerance:
        return None
    first = int(steps[int(np.argmax(gaps > tolerance))])
    return first, float(gaps[-1]), {r: float(values[i, -1]) for i, r in enumerate(ranks)}


def replicated(coverage: dict[str, set[int]]) -> bool:
    """True when parameters look replicated on every rank (DDP), not sharded (FSDP/ZeRO).

    ``coverage``: parameter metric name -> ranks that recorded it. Sharded setups
    record flat or per-rank parameters, so names differ between ranks or carry a marker.
    """
    if not coverage:
        return False
    everyone = set().union(*coverage.values())
    return all(ranks == everyone and not any(m in name for m in SHARDED_MARKERS) for name, ranks in coverage.items())


def _recent_medians(series: RankSeries) -> dict[int, float]:
    """Median of the newer half of each rank's values (the start is warm-up)."""
    return {r: median(v[len(v) // 2 :]) for r, (_, v) in series.items() if len(v) >= MIN_TIMINGS}


def _slowest(medians: dict[int, float]) -> tuple[int, float, float] | None:
    """(rank, its median, the other ranks' median) for the rank with the largest median."""
    if len(medians) < 2:
        return None
    rank = max(medians, key=lambda r: medians[r])
    others = median(np.array([v for r, v in medians.items() if r != rank]))
    return rank, medians[rank], others


def straggler(step_times: RankSeries, data_waits: RankSeries) -> tuple[int, str, float, float, float] | None:
    """(rank, ``"step"`` or ``"data"``, its seconds, the others' seconds, step seconds) for a rank the others wait for.

    Without a per-step collective, a slow rank simply has longer steps. With one
    (DDP's all-reduce), every rank's step takes as long as the slowest: a rank slow
    to load data then shows a long data wait while the others wait inside the
    all-reduce, which the recorder counts as their compute time.
    """
    slow = _slowest(_recent_medians(step_times))
    if slow is None:
        return None
    rank, own, others = slow
    if own > STRAGGLER_RATIO * others and own - others > STRAGGLER_MIN_SECONDS:
        return rank, "step", own, others, own
    step_s = median(np.array(list(_recent_medians(step_times).values())))
    slow = _slowest(_recent_medians(data_waits))
    if slow is None:
        return None
    rank, own, others = slow
    if own - others > DATA_SHARE * step_s and own > STRAGGLER_RATIO * others and own - others > STRAGGLER_MIN_SECONDS:
        return rank, "data", own, others, step_s
    return None
