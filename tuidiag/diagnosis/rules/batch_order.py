"""The silent bug of unshuffled data: batches ordered by class, read from the order of the batches' majority classes.

Nearly single-class batches whose class changes only in long runs (where the runs
of a shuffled order are short) say the loader does not shuffle; a loss that jumps
where the leading class changes, and the same order every epoch, are further evidence.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Compare, Evidence, Level, Periodic, at_step, measure
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.moves import fix_text
from tuidiag.diagnosis.rules.measures import finite_only, steps_between
from tuidiag.diagnosis.view import RunView
from tuidiag.format import LOSS, TARGET_MAJORITY_CLASS
from tuidiag.text.numbers import fmt

ORDERED_SHARE = 0.8
"""Batches whose most frequent class is this share of the batch, typically, are near single-class."""
MIN_RUN = 4
"""A class that leads this many batches in a row, where runs of a shuffled order are short."""
RUNS_SHOWN = 3


# ---- unshuffled_data ----------------------------------------------------------------------------------------------


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) indices of each run of equal consecutive values."""
    if not len(values):
        return []
    starts = np.flatnonzero(np.diff(values) != 0) + 1
    firsts = np.concatenate([[0], starts])
    lasts = np.concatenate([starts - 1, [len(values) - 1]])
    return list(zip(firsts.tolist(), lasts.tolist()))


def _run_line(steps: np.ndarray, classes: np.ndarray, runs: list[tuple[int, int]]) -> Evidence:
    claims, shown = [], []
    for first, last in runs:
        low = measure(TARGET_MAJORITY_CLASS, steps[first : last + 1], classes[first : last + 1], "min")
        high = measure(TARGET_MAJORITY_CLASS, steps[first : last + 1], classes[first : last + 1], "max")
        claims += [Level(low), Level(high)]
        shown.append(f"class {fmt(low.value)} over {low.where}")
    return Evidence("the most frequent class of each batch comes in runs: " + ", ".join(shown), *claims)


def _jump_line(view: RunView, steps: np.ndarray, runs: list[tuple[int, int]]) -> tuple[Evidence | None, float]:
    """The loss where the leading class changes, against the end of the run before (the newest change with both windows);
    and the share of changes where it jumped."""
    l_steps, loss = finite_only(*view.loss)
    jumps, newest = [], None
    for (a0, a1), (b0, b1) in zip(runs, runs[1:]):
        before = steps_between(l_steps, loss, int(steps[max(a0, a1 - 3)]), int(steps[a1]))
        after = steps_between(l_steps, loss, int(steps[b0]), int(steps[min(b1, b0 + 3)]))
        if not len(before[1]) or not len(after[1]):
            continue
        was, now = measure(LOSS, *before, "median"), measure(LOSS, *after, "median")
        jumps.append(now.value > was.value)
        if now.value > was.value:
            newest = (was, now)
    if newest is None:
        return None, 0.0
    was, now = newest
    line = Evidence(f"the loss jumps where the leading class changes: median {fmt(now.value)} over {now.where}, the first "
                    f"batches of a run, against {fmt(was.value)} over {was.where}, the last of the run before",
                    Compare(now, was, "above"))
    return line, float(np.mean(jumps))


def _period_line(steps: np.ndarray, classes: np.ndarray, runs: list[tuple[int, int]]) -> Evidence | None:
    """The first run's class coming back at a fixed period: the same order every epoch."""
    first_class = classes[runs[0][0]]
    starts = [first for first, _ in runs if classes[first] == first_class]
    if len(starts) < 3:
        return None
    shown = tuple(int(steps[i]) for i in starts[:5])
    gaps = np.diff(shown)
    if np.ptp(gaps) > 0.1 * np.median(gaps):
        return None
    every = int(np.median(gaps))
    levels = [Level(at_step(TARGET_MAJORITY_CLASS, steps, classes, i)) for i in starts[: len(shown)]]
    at = ", ".join(f"step {s}" for s in shown)
    return Evidence(f"class {fmt(float(first_class))} leads again every {every} steps (at {at}): the same order every epoch",
                    Periodic(shown, every), *levels)


def unshuffled_data(view: RunView) -> Finding | None:
    """Batches ordered by class: nearly single-class batches whose class changes in long runs."""
    s_steps, shares = finite_only(*view.series("target/majority_share"))
    steps, classes = finite_only(*view.series(TARGET_MAJORITY_CLASS))
    if len(shares) < 20 or len(classes) < 20:
        return None
    level = measure("target/majority_share", s_steps, shares, "median")
    if level.value < ORDERED_SHARE:
        return None
    runs = _runs(classes)
    long_runs = [(a, b) for a, b in runs if b - a + 1 >= MIN_RUN]
    in_long = sum(b - a + 1 for a, b in long_runs)
    if len({classes[a] for a, _ in long_runs}) < 2 or in_long <= len(classes) / 2:
        return None
    count = measure("target/majority_share", s_steps, shares, "count")
    evidence: list[str] = [
        Evidence(f"the most frequent class is {level.value:.0%} of a typical batch (median over the {int(count.value)} batches "
                 f"of {level.where}), and which class that is changes only every few batches", Level(level), Level(count)),
        _run_line(steps, classes, long_runs[:RUNS_SHOWN]),
    ]
    jump, jumped = _jump_line(view, steps, runs)
    period = _period_line(steps, classes, runs)
    evidence += [line for line in (jump, period) if line is not None]
    fix = fix_text("shuffle the training data: DataLoader(dataset, shuffle=True) (or a sampler that shuffles), or draw a new "
                   "permutation (torch.randperm) each epoch where the batches are cut")
    confidence = 0.9 if jumped >= 0.5 else 0.8
    title = "Training batches are ordered by class (not shuffled)"
    return Finding("unshuffled_data", title, confidence, "warning", evidence, fix, int(steps[long_runs[0][0]]))


RULES = [unshuffled_data]
