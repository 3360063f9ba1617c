"""Scoring diagnoses against the suite's labels: accuracy, false alarms, per-code P/R, calibration, delay."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

from benchmarks.suite.train import Spec
from tuidiag.diagnosis import Diagnosis

ALARMS = ("warning", "critical")
BINS = 10


@dataclass
class Outcome:
    """How the engine did on one scenario."""

    spec: Spec
    codes: list[str]
    """Codes of the findings, most likely first."""
    confidence: float
    """Confidence of the top finding."""
    alarms: list[str]
    """Codes raised at warning or critical level."""
    delay: int | None = None
    """Steps from fault onset until an acceptable code first ranked first (None: never)."""
    scanned: bool = False
    """Whether the detection-delay grid was evaluated."""
    live_alarms: list[str] = field(default_factory=list)
    """Healthy runs only: alarms at any step of the grid, as ``code@step``."""

    @property
    def top1(self) -> bool:
        """The top finding is acceptable."""
        return self.codes[0] in self.spec.acceptable

    @property
    def top3(self) -> bool:
        """An acceptable code is among the first three findings."""
        return any(code in self.spec.acceptable for code in self.codes[:3])

    @property
    def false_alarms(self) -> list[str]:
        """Alarms this scenario labels as wrong."""
        return [code for code in self.alarms if code in self.spec.false_alarm]


def outcome(spec: Spec, diagnosis: Diagnosis) -> Outcome:
    """The outcome of one final diagnosis."""
    codes = [f.code for f in diagnosis.findings]
    alarms = [f.code for f in diagnosis.findings if f.severity in ALARMS]
    return Outcome(spec, codes, float(diagnosis.top.confidence), alarms)


GRID = (0.0, 0.02, 0.04, 0.07, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Where ``diagnose(run, at=...)`` is evaluated, as shares of the span from fault onset to the last step."""


def grid(onset: int, last_step: int) -> list[int]:
    """The coarse grid of steps from ``onset`` to ``last_step`` (denser early, where detection happens)."""
    span = max(0, last_step - onset)
    return sorted({min(last_step, onset + round(span * share)) for share in GRID})


def detection_delay(spec: Spec, last_step: int, diagnose_at: Callable[[int], Diagnosis]) -> int | None:
    """First grid step at or after ``spec.onset`` where an acceptable code ranks first, minus the onset."""
    if spec.family == "healthy":
        return None
    for step in grid(spec.onset, last_step):
        if diagnose_at(step).top.code in spec.acceptable:
            return step - spec.onset
    return None


def early_alarms(last_step: int, diagnose_at: Callable[[int], Diagnosis]) -> list[str]:
    """For a healthy run: alarms raised at any grid step (what a live monitor would have shown)."""
    found = []
    for step in grid(0, last_step)[1:]:
        found += [f"{f.code}@{step}" for f in diagnose_at(step).findings if f.severity in ALARMS]
    return found


@dataclass
class Report:
    """Every figure the benchmark prints for one part of the suite."""

    n: int
    top1: float
    top3: float
    healthy_runs: int
    healthy_false_alarms: list[str]
    healthy_live_alarms: list[str]
    faulty_false_alarms: int
    per_code: dict[str, tuple[float | None, float | None, int]]
    ece: float
    calibration: list[tuple[str, float, float, int]]
    median_delay: float | None
    undetected: int
    misses: list[str] = field(default_factory=list)


def per_code(outcomes: list[Outcome]) -> dict[str, tuple[float | None, float | None, int]]:
    """code -> (precision of the top-1 predictions of it, recall over scenarios of its family, support)."""
    codes = sorted({o.spec.family for o in outcomes} | {o.codes[0] for o in outcomes})
    table = {}
    for code in codes:
        predicted = [o for o in outcomes if o.codes[0] == code]
        family = [o for o in outcomes if o.spec.family == code]
        precision = sum(code in o.spec.acceptable for o in predicted) / len(predicted) if predicted else None
        recall = sum(o.top1 for o in family) / len(family) if family else None
        table[code] = (precision, recall, len(family))
    return table


def calibration(outcomes: list[Outcome], bins: int = BINS) -> tuple[float, list[tuple[str, float, float, int]]]:
    """Expected calibration error of the top finding's confidence, and the (bin, mean conf, accuracy, n) table."""
    rows, ece = [], 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [o for o in outcomes if lo <= o.confidence < hi or (b == bins - 1 and o.confidence == 1.0)]
        if not members:
            continue
        conf = statistics.fmean(o.confidence for o in members)
        acc = statistics.fmean(float(o.top1) for o in members)
        ece += len(members) / len(outcomes) * abs(acc - conf)
        rows.append((f"{lo:.1f}-{hi:.1f}", conf, acc, len(members)))
    return ece, rows


def report(outcomes: list[Outcome]) -> Report:
    """All figures for a list of outcomes."""
    healthy = [o for o in outcomes if o.spec.family == "healthy"]
    faulty = [o for o in outcomes if o.spec.family != "healthy"]
    scanned = [o for o in faulty if o.scanned]
    delays = [o.delay for o in scanned if o.delay is not None]
    ece, table = calibration(outcomes)
    return Report(
        n=len(outcomes),
        top1=statistics.fmean(o.top1 for o in outcomes),
        top3=statistics.fmean(o.top3 for o in outcomes),
        healthy_runs=len(healthy),
        healthy_false_alarms=[f"{o.spec.name}: {', '.join(o.alarms)}" for o in healthy if o.alarms],
        healthy_live_alarms=[f"{o.spec.name}: {', '.join(o.live_alarms)}" for o in healthy if o.live_alarms],
        faulty_false_alarms=sum(bool(o.false_alarms) for o in faulty),
        per_code=per_code(outcomes),
        ece=ece,
        calibration=table,
        median_delay=statistics.median(delays) if delays else None,
        undetected=len(scanned) - len(delays),
        misses=[f"{o.spec.name}: got {', '.join(o.codes[:3])}; wanted {' or '.join(o.spec.acceptable)}" for o in outcomes if not o.top1],
    )
