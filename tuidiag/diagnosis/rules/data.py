"""Rules read from input and target health: bad inputs, class imbalance."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Evidence, Level, Measure, Occurrences, measure
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.stats import finite
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import TARGET_MAJORITY_CLASS

SEVERE_STD, SEVERE_ABS = 100.0, 1e3
"""Inputs this spread out saturate or blow up any layer fed with them."""
LEADER_SHARE = 0.8
"""An imbalance has one class leading this share of the batches (recorded as ``target/majority_class``)."""


def _input_level(view: RunView, key: str) -> Measure | None:
    steps, values = view.series(f"input/{key}")
    return measure(f"input/{key}", steps, values, "median") if len(values) else None


def _scale_problem(view: RunView) -> tuple[Evidence | None, bool]:
    """Evidence that inputs are far from normalized, and whether it is severe."""
    levels = {k: _input_level(view, k) for k in ("mean", "std", "abs_max")}
    mean, std, absmax = (m.value if m is not None else float("nan") for m in levels.values())
    if not np.isfinite(std) or not (abs(mean) > 5 or std > 20 or std < 1e-3 or absmax > 1e4):
        return None, False
    shown = [(k.replace("_", "-"), m) for k, m in levels.items() if m is not None]
    levels_text = ", ".join(f"{k} {fmt(m.value)} over {m.where}" for k, m in shown)
    text = f"inputs far from normalized: median {levels_text} (expect ~0, ~1)"
    return Evidence(text, *(Level(m) for _, m in shown), refs=(0, 1)), bool(std > SEVERE_STD or absmax > SEVERE_ABS)


def bad_input_data(view: RunView) -> Finding | None:
    """Inputs are non-finite, extreme or far from normalized."""
    steps, nonfinite = view.series("input/nonfinite")
    evidence: list[str] = []
    first, confidence = None, 0.0
    bad = np.flatnonzero(nonfinite > 0)
    if len(bad):
        first = int(steps[bad[0]])
        listed = tuple(int(s) for s in steps[bad[:5]])
        most = measure("input/nonfinite", steps, nonfinite, "max")
        where = Occurrences(("input/nonfinite",), int(steps[0]), int(steps[-1]), "positive", listed, len(bad))
        evidence.append(Evidence(f"{len(bad)} batches over {most.where} contain non-finite inputs (up to {int(most.value)} values), "
                                 f"at steps {', '.join(str(s) for s in listed)}", where, Level(most)))
        confidence = 0.9
    scale, severe = _scale_problem(view)
    if scale:
        evidence.append(scale)
        confidence = max(confidence, 0.9 if severe else 0.7)
        first = first if first is not None else int(view.series("input/std")[0][0])
    if not evidence:
        return None
    fix = "validate batches (assert torch.isfinite(x).all()), filter or repair bad samples, and normalize inputs to zero mean and unit variance"
    finding = Finding("bad_input_data", "Bad input data", confidence, "critical" if len(bad) or severe else "warning", evidence, fix, first)
    finding.tags = {"severe"} if len(bad) or severe else set()
    return finding


def class_imbalance(view: RunView) -> Finding | None:
    """One class dominates the targets passed to ``rec.batch``."""
    steps, share = view.series("target/majority_share")
    if len(share) < 20:
        return None
    level = measure("target/majority_share", steps, share, "median")
    if level.value < 0.9:
        return None
    leaders = finite(view.series(TARGET_MAJORITY_CLASS)[1])
    if len(leaders) >= 20 and np.unique(leaders, return_counts=True)[1].max() < LEADER_SHARE * len(leaders):
        return None  # the leading class changes: batches ordered by class (unshuffled_data), not a class that dominates
    count = measure("target/majority_share", steps, share, "count")
    evidence: list[str] = [Evidence(f"the most frequent class is {level.value:.0%} of a typical batch (median over the {len(share)} "
                                    f"batches of {level.where})", Level(level), Level(count))]
    fix = "re-balance: class weights in the loss (CrossEntropyLoss(weight=...)), a weighted sampler, or report per-class metrics"
    return Finding("class_imbalance", "Class imbalance in the targets", 0.85, "warning", evidence, fix, int(steps[0]))


RULES = [bad_input_data, class_imbalance]
