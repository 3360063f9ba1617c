"""Rules only several ranks can reveal (DDP-style data parallelism): which rank broke first,
replicas that drifted apart, a rank the others wait for.

tuidiag extensions to the shared code list (``docs/multi-rank.md``); each fires only
on runs with more than one rank. The comparisons live in
:mod:`tuidiag.diagnosis.rank_stats` as pure functions of per-rank series.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Disagreement, Evidence, Level, Measure, Occurrences, at_step, measure, quoted
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rank_stats import (
    REPLICA_TOLERANCE,
    RankSeries,
    aligned,
    first_nonfinite,
    norm_disagreement,
    replicated,
    straggler,
)
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_TOTAL, INPUT_PREFIX, LOSS, LR_GROUP0, TIME_DATA_WAIT, TIME_STEP, WEIGHT_NORM_PREFIX


def per_rank(view: RunView, name: str) -> RankSeries:
    """``{rank: (steps, values)}`` of metric ``name`` for every rank that recorded it (up to ``view.at``)."""
    out = {}
    for rank in view.run.ranks:
        steps, values = view.series(name, rank)
        if len(steps):
            out[rank] = (steps, values)
    return out


def _multi(view: RunView) -> bool:
    return len(view.run.ranks) > 1


def _bad_inputs(view: RunView, rank: int, step: int) -> Measure | None:
    """How many non-finite input values ``rank``'s batch held at ``step`` (``None`` when none or unknown)."""
    series = per_rank(view, INPUT_PREFIX + "nonfinite").get(rank)
    if series is None:
        return None
    at = np.flatnonzero(series[0] == step)
    if not len(at) or not series[1][at[0]] > 0:
        return None
    return at_step(INPUT_PREFIX + "nonfinite", series[0], series[1], int(at[0]), rank=rank)


def _onset(view: RunView, rank: int, step: int | None) -> Occurrences:
    """The claim that ``rank`` first went non-finite (loss or gradient norm) at ``step``, or never (``None``)."""
    steps = [s for name in (LOSS, GRAD_NORM_TOTAL) for s in view.series(name, rank)[0][:1]]
    first = int(min(steps)) if steps else 0
    last = int(max(view.series(name, rank)[0][-1] for name in (LOSS, GRAD_NORM_TOTAL) if len(view.series(name, rank)[0])))
    if step is None:
        return Occurrences((LOSS, GRAD_NORM_TOTAL), first, last, "nonfinite", (), 0, rank=rank)
    return Occurrences((LOSS, GRAD_NORM_TOTAL), first, step, "nonfinite", (step,), None, rank=rank)


def rank_nonfinite_first(view: RunView) -> Finding | None:
    """One rank's loss or gradients turned non-finite before the other ranks'."""
    if not _multi(view):
        return None
    found = first_nonfinite(per_rank(view, LOSS), per_rank(view, GRAD_NORM_TOTAL))
    if found is None:
        return None
    rank, step, others = found
    later = ", ".join(
        f"rank {r} at step {s}" if s is not None else f"rank {r} never" for r, s in sorted(others.items())
    )
    evidence: list[str] = [
        Evidence(f"rank {rank} went non-finite first, at step {step}", _onset(view, rank, step)),
        Evidence(f"the other ranks: {later}", *(_onset(view, r, s) for r, s in sorted(others.items()))),
    ]
    bad = _bad_inputs(view, rank, step)
    if bad is not None:
        evidence.append(Evidence(f"rank {rank}'s batch at step {step} held {int(bad.value)} non-finite input values", Level(bad)))
    fix = (
        f"the fault is local to rank {rank}: inspect the batch rank {rank} loaded at step {step} (its data shard or "
        f"sampler), replay it with `tuidiag nan-hunt RUN --capture RUN/captures/nan-r{rank}-step{step}.pt`, "
        "and check that rank's device"
    )
    title = f"Rank {rank} turned non-finite first"
    tags = {"bad_input"} if bad is not None else set()
    return Finding("rank_nonfinite_first", title, 0.95 if bad is not None else 0.85, "critical", evidence, fix, step, tags=tags)


def _at_common(view: RunView, name: str, step: int) -> list[Measure]:
    """Each rank's value of ``name`` at ``step``."""
    out = []
    for r, (steps, values) in sorted(per_rank(view, name).items()):
        at = np.flatnonzero(steps == step)
        if len(at):
            out.append(at_step(name, steps, values, int(at[0]), rank=r))
    return out


def _weight_evidence(view: RunView) -> tuple[list[str], int | None, float]:
    """Evidence from weight norms that should be equal on every replica: lines, first step, worst gap."""
    names = [m for m in view.run.metric_names if m.startswith(WEIGHT_NORM_PREFIX)]
    first, worst, lines = None, 0.0, []
    for name in names:
        series = per_rank(view, name)
        gap = norm_disagreement(series)
        if gap is None:
            continue
        step, value, _ = gap
        if first is None or step < first:
            first = step
        if value > worst:
            worst = value
            newest = _newest_common(series)
            values = _at_common(view, name, newest)
            shown = ", ".join(f"rank {m.rank} {fmt(m.value)}" for m in values)
            claim = Disagreement(name, step, newest, value, REPLICA_TOLERANCE)
            lines = [Evidence(f"{quoted(name)} disagrees between replicas (first at step {step}); at the newest common step "
                              f"{newest}: {shown}", claim, *(Level(m) for m in values)),
                     Evidence(f"largest relative gap {worst:.1%}; replicas of a data-parallel model should hold identical weights",
                              claim)]
    return lines, first, worst


def _newest_common(series: RankSeries) -> int:
    """The newest step at which every rank recorded a finite value."""
    _, steps, values = aligned(series)
    ok = np.isfinite(values).all(axis=0)
    return int(steps[ok][-1])


def rank_desync(view: RunView) -> Finding | None:
    """Replicas of a data-parallel run drifted apart: weight norms differ between ranks."""
    if not _multi(view):
        return None
    names = [m for m in view.run.metric_names if m.startswith(WEIGHT_NORM_PREFIX)]
    if not replicated({name: set(per_rank(view, name)) for name in names}):
        return None
    evidence, first, _ = _weight_evidence(view)
    if first is None:
        return None
    lrs = [at_step(LR_GROUP0, steps, values, len(values) - 1, rank=r)
           for r, (steps, values) in sorted(per_rank(view, LR_GROUP0).items())]
    if len({m.value for m in lrs}) > 1:
        shown = ", ".join(f"rank {m.rank} {fmt(m.value)} at step {m.first}" for m in lrs)
        evidence.append(Evidence(f"learning rates differ between ranks: {shown}", *(Level(m) for m in lrs)))
    grad_series = per_rank(view, GRAD_NORM_TOTAL)
    grads = norm_disagreement(grad_series)
    if grads is not None:
        claim = Disagreement(GRAD_NORM_TOTAL, grads[0], _newest_common(grad_series), grads[1], REPLICA_TOLERANCE)
        evidence.append(Evidence("gradient norms also differ between ranks (not all-reduced, or recorded before the all-reduce)",
                                 claim))
    elif len(grad_series) > 1:
        evidence.append(Evidence("gradient norms agree (they are all-reduced): the optimizer step differs between ranks",
                                 Disagreement(GRAD_NORM_TOTAL, None, None, 0.0, REPLICA_TOLERANCE)))
    fix = (
        "make every rank take the same optimizer step: the same LR and schedule (no rank-dependent config), "
        "the same optimizer state on resume, every rank stepping on every iteration; wrap the model in "
        "DistributedDataParallel (or all-reduce every gradient) and broadcast the initial weights from rank 0"
    )
    return Finding("rank_desync", "Replicas out of sync between ranks", 0.85, "critical", evidence, fix, first)


def _newer_halves(view: RunView, name: str) -> dict[int, Measure]:
    """Each rank's median of ``name`` over the newer half of its values (as :mod:`~tuidiag.diagnosis.rank_stats` compares)."""
    out = {}
    for r, (steps, values) in per_rank(view, name).items():
        if len(values):
            half = len(values) // 2
            out[r] = measure(name, steps[half:], values[half:], "median", rank=r)
    return out


def _ms_range(measures: list[Measure]) -> str:
    """``12 ms`` or ``1.1 to 1.3 ms`` over the given per-rank medians."""
    low, high = min(m.value for m in measures), max(m.value for m in measures)
    return f"{fmt(low * 1e3)} ms" if low == high else f"{fmt(low * 1e3)} to {fmt(high * 1e3)} ms"


def straggler_rank(view: RunView) -> Finding | None:
    """One rank is much slower than the others and sets the pace of the whole job."""
    if not _multi(view):
        return None
    found = straggler(per_rank(view, TIME_STEP), per_rank(view, TIME_DATA_WAIT))
    if found is None:
        return None
    rank, kind, own, others, _ = found
    metric = TIME_DATA_WAIT if kind == "data" else TIME_STEP
    halves = _newer_halves(view, metric)
    mine, rest = halves[rank], [m for r, m in sorted(halves.items()) if r != rank]
    claims = [Level(mine), *(Level(m) for m in rest)]
    if kind == "data":
        steps_all = list(_newer_halves(view, TIME_STEP).values())
        evidence: list[str] = [
            Evidence(f"rank {rank} waits {fmt(mine.value * 1e3)} ms per step for data over {mine.where}, the other ranks "
                     f"{_ms_range(rest)} (medians over the newer half of each rank's steps)", *claims),
            Evidence(f"the other ranks spend that time waiting for rank {rank} in the gradient all-reduce; "
                     f"a step takes {_ms_range(steps_all)} on every rank (medians)", *(Level(m) for m in steps_all)),
        ]
        fix = (
            f"speed up rank {rank}'s input pipeline: check its host (CPU contention, disk or network), "
            "DataLoader num_workers, and whether its data shard is larger or slower to decode"
        )
    else:
        evidence = [Evidence(f"rank {rank} takes {fmt(mine.value * 1e3)} ms per step over {mine.where}, the other ranks "
                             f"{_ms_range(rest)} (medians over the newer half of each rank's steps)", *claims)]
        fix = (
            f"look at rank {rank}'s device and host: thermal throttling or a slower GPU "
            "(nvidia-smi -q -d PERFORMANCE), other processes on it, a larger share of the data"
        )
    confidence = float(min(0.9, 0.6 + 0.1 * np.log2(max(own, 1e-9) / max(others, 1e-9))))
    return Finding("straggler_rank", f"Rank {rank} is a straggler", confidence, "warning", evidence, fix)


RULES = [rank_nonfinite_first, rank_desync, straggler_rank]
