"""Fit the confidence tables of ``tuidiag/diagnosis/calibration.json`` from diagnosed suite runs.

What is fitted: every finding the engine ranked (the alarms, or the lone ``healthy``) in the
final diagnosis of every ``tune`` scenario, as (code, raw score, named the cause?), where
"named the cause" means the code is one the scenario accepts (``healthy`` on a healthy run).
Only codes whose family the fitted runs include are fitted: where no run has a code as its
cause, every finding of it is wrong by construction, which says nothing about how often it
is right when that fault happens. Codes not covered use the pooled table.

How, per code, monotone in the raw score:

1. A pooled table: isotonic regression (pool adjacent violators) of "named the cause" on
   the raw score over all codes together; each block's value is its rule-of-succession
   estimate ``(hits + 1) / (n + 2)`` (made monotone again), so no finite sample claims 0% or 100%.
2. Each code's own isotonic blocks, shrunk toward the pooled table: a block of ``n``
   findings with ``hits`` becomes ``(hits + m * pooled(x)) / (n + m)``, made monotone again.
   Below and above the scores the code had, the pooled table takes over (never above the
   code's lowest value below, never under its highest above): a symptom whose score the
   combiner discounted is not given the confidence the code earned as a top finding.
   A code never seen while fitting uses the pooled table.
3. The prior strength ``m`` is chosen from a grid by leave-one-scenario-out
   cross-validation on the tune split (the Brier score of the left-out scenario's findings).

Nothing here is hand-set but the grid of ``m`` (which leaves out 0: a prior always counts) and the rule of succession.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

Point = tuple[str, float, int]
"""(code, raw score, 1 if it named the cause else 0)."""
Run = tuple[str, list[Point]]
"""One fitted run: its family, and its findings."""
POOLED = "*"
STRENGTHS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 1e9)
"""Prior strengths ``m`` tried (1e9: every code uses the pooled table). Never 0: a code's few findings alone
would claim 0% or 100%."""
DIGITS = 6
"""Raw scores are compared at this many decimals (the file stores them so)."""


@dataclass
class Table:
    """A monotone table: increasing raw scores, calibrated confidences, and the findings behind it."""

    raw: np.ndarray
    p: np.ndarray
    n: int

    def __call__(self, x: np.ndarray | float) -> np.ndarray:
        """The table's value at ``x`` (linear between points, flat beyond them)."""
        return np.interp(x, self.raw, self.p)

    def to_json(self) -> dict[str, Any]:
        """The table as the package's file holds it."""
        return {"raw": [round(float(v), DIGITS) for v in self.raw], "p": [round(float(v), DIGITS) for v in self.p], "n": self.n}


def pav(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pool adjacent violators: the non-decreasing fit of ``y`` (already in raw-score order) with weights ``w``."""
    blocks: list[list[float]] = []  # [weighted sum, weight, count of points]
    for yi, wi in zip(y.tolist(), w.tolist()):
        blocks.append([yi * wi, wi, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, wt, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += wt
            blocks[-1][2] += c
    return np.concatenate([np.full(int(c), s / wt) for s, wt, c in blocks]) if blocks else np.empty(0)


def _distinct(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct raw scores ascending, hits at each, findings at each)."""
    xs, inverse = np.unique(x, return_inverse=True)
    return xs, np.bincount(inverse, weights=y, minlength=len(xs)), np.bincount(inverse, minlength=len(xs)).astype(float)


def pooled_table(x: np.ndarray, y: np.ndarray) -> Table:
    """Isotonic fit over every finding, each block at its rule-of-succession estimate."""
    xs, hits, n = _distinct(x, y)
    fitted = pav(hits / n, n)
    p, weight = np.empty(len(xs)), np.empty(len(xs))
    start = 0
    while start < len(xs):  # each block of equal fitted values gets (hits + 1) / (n + 2)
        end = start
        while end + 1 < len(xs) and fitted[end + 1] == fitted[start]:
            end += 1
        block = slice(start, end + 1)
        p[block] = (hits[block].sum() + 1) / (n[block].sum() + 2)
        weight[block] = n[block] + 2 / (end + 1 - start)
        start = end + 1
    return Table(xs, pav(p, weight), int(n.sum()))  # the estimates of small blocks move more: monotone again


def code_table(x: np.ndarray, y: np.ndarray, pooled: Table, strength: float) -> Table:
    """One code's isotonic blocks shrunk toward ``pooled`` with prior strength ``strength``, made monotone again."""
    xs, hits, n = _distinct(x, y)
    fitted = pav(hits / n, n)
    shrunk = np.empty(len(xs))
    weight = np.empty(len(xs))
    start = 0
    while start < len(xs):
        end = start
        while end + 1 < len(xs) and fitted[end + 1] == fitted[start]:
            end += 1
        block = slice(start, end + 1)
        size = n[block].sum()
        prior = float(np.average(pooled(xs[block]), weights=n[block]))
        shrunk[block] = (hits[block].sum() + strength * prior) / (size + strength)
        weight[block] = n[block] + strength / (end + 1 - start)
        start = end + 1
    own = pav(shrunk, weight)
    below, above = pooled.raw < xs[0], pooled.raw > xs[-1]  # beyond its own scores a code follows the pooled table
    raw = np.concatenate([pooled.raw[below], xs, pooled.raw[above]])
    p = np.concatenate([np.minimum(pooled.p[below], own[0]), own, np.maximum(pooled.p[above], own[-1])])
    return Table(raw, p, int(n.sum()))


def fit(runs: list[Run], strength: float) -> dict[str, Table]:
    """The pooled table and one table per code covered by ``runs``' families, at prior strength ``strength``."""
    covered = {family for family, _ in runs}
    points = [p for _, found in runs for p in found if p[0] in covered]
    x = np.round(np.array([p[1] for p in points], dtype=float), DIGITS)
    y = np.array([p[2] for p in points], dtype=float)
    pooled = pooled_table(x, y)
    tables = {POOLED: pooled}
    if strength >= 1e9:
        return tables
    by_code: dict[str, list[int]] = defaultdict(list)
    for i, (code, _, _) in enumerate(points):
        by_code[code].append(i)
    for code, idx in sorted(by_code.items()):
        tables[code] = code_table(x[idx], y[idx], pooled, strength)
    return tables


def predict(tables: dict[str, Table], code: str, raw: float) -> float:
    """The calibrated confidence of one finding."""
    return float(tables.get(code, tables[POOLED])(raw))


def choose_strength(runs: list[Run]) -> tuple[float, dict[float, float]]:
    """The prior strength with the lowest leave-one-run-out Brier score, and the score of each tried."""
    scores = {}
    for strength in STRENGTHS:
        errors = []
        for i, (_, held) in enumerate(runs):
            tables = fit(runs[:i] + runs[i + 1:], strength)
            errors += [(predict(tables, code, raw) - hit) ** 2 for code, raw, hit in held]
        scores[strength] = statistics.fmean(errors)
    best = min(scores, key=lambda s: (scores[s], -s))
    return best, scores


def write(path: Path, tables: dict[str, Table], strength: float, scores: dict[float, float], runs: list[Run],
          source: str) -> None:
    """Write the fitted tables, with what they were fitted on, as the package's calibration file."""
    document = {
        "about": "Confidence calibration of diagnosis findings: raw rule score -> share of suite findings that named the "
                 "planted cause. Fitted by benchmarks/diagnosis_accuracy.py --fit-calibration; see docs/calibration.md.",
        "fitted_on": source,
        "runs": len(runs),
        "findings": sum(len(found) for _, found in runs),
        "method": "isotonic per code (pool adjacent violators), shrunk toward the pooled isotonic table (rule-of-succession "
                  "blocks) with a prior strength chosen by leave-one-run-out Brier score; only codes whose fault family the "
                  "runs include",
        "prior_strength": strength,
        "cv_brier": {f"{k:g}": round(v, 5) for k, v in scores.items()},
        "tables": {code: table.to_json() for code, table in tables.items()},
    }
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
