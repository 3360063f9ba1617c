"""Rules only several ranks can reveal (DDP-style data parallelism): which rank broke first,
replicas that drifted apart, a rank the others wait for.

tuidiag extensions to the shared code list (``docs/multi-rank.md``); each fires only
on runs with more than one rank. The comparisons live in
:mod:`tuidiag.diagnosis.rank_stats` as pure functions of per-rank series.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rank_stats import (
    RankSeries,
    first_nonfinite,
    norm_disagreement,
    replicated,
    straggler,
)
from tuidiag.diagnosis.stats import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_TOTAL, INPUT_PREFIX, LOSS, TIME_DATA_WAIT, TIME_STEP, WEIGHT_NORM_PREFIX


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


def _bad_inputs(view: RunView, rank: int, step: int) -> int:
    """How many non-finite input values ``rank``'s batch held at ``step`` (0 when unknown)."""
    series = per_rank(view, INPUT_PREFIX + "nonfinite").get(rank)
    if series is None:
        return 0
    at_step = series[1][series[0] == step]
    return int(at_step[0]) if len(at_step) and at_step[0] > 0 else 0


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
    evidence = [f"rank {rank} went non-finite first, at step {step}", f"the other ranks: {later}"]
    bad = _bad_inputs(view, rank, step)
    if bad:
        evidence.append(f"rank {rank}'s batch at step {step} held {bad} non-finite input values")
    fix = (
        f"the fault is local to rank {rank}: inspect the batch rank {rank} loaded at step {step} (its data shard or "
        f"sampler), replay it with `tuidiag nan-hunt RUN --capture RUN/captures/nan-r{rank}-step{step}.pt`, "
        "and check that rank's device"
    )
    title = f"Rank {rank} turned non-finite first"
    tags = {"bad_input"} if bad else set()
    return Finding("rank_nonfinite_first", title, 0.95 if bad else 0.85, "critical", evidence, fix, step, tags=tags)


def _weight_evidence(view: RunView) -> tuple[list[str], int | None, float]:
    """Evidence from weight norms that should be equal on every replica: lines, first step, worst gap."""
    names = [m for m in view.run.metric_names if m.startswith(WEIGHT_NORM_PREFIX)]
    first, worst, lines = None, 0.0, []
    for name in names:
        gap = norm_disagreement(per_rank(view, name))
        if gap is None:
            continue
        step, value, by_rank = gap
        if first is None or step < first:
            first = step
        if value > worst:
            worst = value
            shown = ", ".join(f"rank {r} {fmt(v)}" for r, v in sorted(by_rank.items()))
            lines = [f"{name} disagrees between replicas (first at step {step}); at the newest common step: {shown}"]
    return lines, first, worst


def rank_desync(view: RunView) -> Finding | None:
    """Replicas of a data-parallel run drifted apart: weight norms differ between ranks."""
    if not _multi(view):
        return None
    names = [m for m in view.run.metric_names if m.startswith(WEIGHT_NORM_PREFIX)]
    if not replicated({name: set(per_rank(view, name)) for name in names}):
        return None
    evidence, first, worst = _weight_evidence(view)
    if first is None:
        return None
    evidence.append(
        f"largest relative gap {worst:.1%}; replicas of a data-parallel model should hold identical weights"
    )
    lrs = {r: float(v[-1]) for r, (_, v) in per_rank(view, "lr/group0").items()}
    if len(set(lrs.values())) > 1:
        evidence.append(
            "learning rates differ between ranks: " + ", ".join(f"rank {r} {fmt(v)}" for r, v in sorted(lrs.items()))
        )
    grads = norm_disagreement(per_rank(view, GRAD_NORM_TOTAL))
    evidence.append(
        "gradient norms also differ between ranks (not all-reduced, or recorded before the all-reduce)"
        if grads is not None
        else "gradient norms agree (they are all-reduced): the optimizer step differs between ranks"
    )
    fix = (
        "make every rank take the same optimizer step: the same LR and schedule (no rank-dependent config), "
        "the same optimizer state on resume, every rank stepping on every iteration; wrap the model in "
        "DistributedDataParallel (or all-reduce every gradient) and broadcast the initial weights from rank 0"
    )
    return Finding("rank_desync", "Replicas out of sync between ranks", 0.85, "critical", evidence, fix, first)


def straggler_rank(view: RunView) -> Finding | None:
    """One rank is much slower than the others and sets the pace of the whole job."""
    if not _multi(view):
        return None
    found = straggler(per_rank(view, TIME_STEP), per_rank(view, TIME_DATA_WAIT))
    if found is None:
        return None
    rank, kind, own, others, step_s = found
    if kind == "data":
        evidence = [
            f"rank {rank} waits {fmt(own * 1e3)} ms per step for data, the other ranks {fmt(others * 1e3)} ms",
            f"the other ranks spend that time waiting for rank {rank} in the gradient all-reduce; "
            f"every step takes {fmt(step_s * 1e3)} ms",
        ]
        fix = (
            f"speed up rank {rank}'s input pipeline: check its host (CPU contention, disk or network), "
            "DataLoader num_workers, and whether its data shard is larger or slower to decode"
        )
    else:
        evidence = [f"rank {rank} takes {fmt(own * 1e3)} ms per step, the other ranks {fmt(others * 1e3)} ms (median)"]
        fix = (
            f"look at rank {rank}'s device and host: thermal throttling or a slower GPU "
            "(nvidia-smi -q -d PERFORMANCE), other processes on it, a larger share of the data"
        )
    confidence = float(min(0.9, 0.6 + 0.1 * np.log2(max(own, 1e-9) / max(others, 1e-9))))
    return Finding("straggler_rank", f"Rank {rank} is a straggler", confidence, "warning", evidence, fix)


RULES = [rank_nonfinite_first, rank_desync, straggler_rank]
