"""Scoring diagnoses against the suite's labels: accuracy, false alarms, per-code P/R, calibration, delay."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

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
    """Confidence of the top finding (calibrated)."""
    alarms: list[str]
    """Codes raised at warning or critical level."""
    raw_confidence: float = float("nan")
    """The top finding's raw rule score, before calibration."""
    last_step: int | None = None
    """The run's last recorded step."""
    findings: list[tuple[str, float, float]] = field(default_factory=list)
    """Every ranked finding as (code, calibrated confidence, raw score): what the calibration is fitted on."""
    delay: int | None = None
    """Steps from the step the fault became observable until an acceptable code first ranked first (None: never)."""
    delay_top3: int | None = None
    """Steps from the same step until an acceptable code was first among the first three findings (None: never)."""
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
    def delay_share(self) -> float | None:
        """The detection delay as a share of the run's length (steps recorded)."""
        if self.delay is None or self.last_step is None:
            return None
        return self.delay / (self.last_step + 1)

    @property
    def delay_top3_share(self) -> float | None:
        """The top-3 detection delay as a share of the run's length."""
        if self.delay_top3 is None or self.last_step is None:
            return None
        return self.delay_top3 / (self.last_step + 1)

    @property
    def false_alarms(self) -> list[str]:
        """Alarms this scenario labels as wrong."""
        return [code for code in self.alarms if code in self.spec.false_alarm]


def outcome(spec: Spec, diagnosis: Diagnosis, last_step: int | None = None) -> Outcome:
    """The outcome of one final diagnosis."""
    codes = [f.code for f in diagnosis.findings]
    alarms = [f.code for f in diagnosis.findings if f.severity in ALARMS]
    ranked = [(f.code, float(f.confidence), float(f.confidence if f.raw_confidence is None else f.raw_confidence))
              for f in diagnosis.findings]
    return Outcome(spec, codes, ranked[0][1], alarms, ranked[0][2], last_step, ranked)


GRID = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Where ``diagnose(run, at=...)`` is evaluated, as shares of the span from the observable onset to the last step
(every 1% up to 6%, where the 5% target lies, so a delay is never rounded up past it by the grid)."""


def grid(onset: int, last_step: int) -> list[int]:
    """The grid of steps from ``onset`` to ``last_step`` (denser early, where detection happens)."""
    span = max(0, last_step - onset)
    return sorted({min(last_step, onset + round(span * share)) for share in GRID})


def observable_from(spec: Spec, last_step: int, val_steps: Sequence[int] = (), val_loss: Sequence[float] = ()) -> int:
    """The step from which the planted fault can be seen in the recorded data: where the delay is counted from.

    Mostly the fault's onset (``spec.onset``; the run's last step when it is negative: a fault
    that acts once and ends the run). Two faults are present from the start but cannot show
    before the run has produced what they corrupt:

    - ``frozen_val_metric``: a repeated value needs two evaluations, so the second one after the onset;
    - ``overfitting``: the model memorises its small train set from the start, but validation
      loss is not worse than before until it has passed its lowest point: the evaluation
      with the lowest running median of three (the same smoothing the rule uses), taken
      over the whole recorded run.
    """
    onset = last_step if spec.onset < 0 else spec.onset
    evals = [int(s) for s in val_steps if s >= onset]
    if spec.family == "frozen_val_metric" and len(evals) >= 2:
        return max(onset, evals[1])
    if spec.family == "overfitting" and len(val_loss) >= 3:
        values = np.asarray(val_loss, dtype=float)
        smooth = np.concatenate([values[:1], np.median(np.stack([values[:-2], values[1:-1], values[2:]]), axis=0), values[-1:]])
        return max(onset, int(np.asarray(val_steps)[int(np.nanargmin(smooth))]))
    return onset


def detection_delay(spec: Spec, last_step: int, diagnose_at: Callable[[int], Diagnosis], onset: int | None = None,
                    top: int = 1) -> int | None:
    """First grid step at or after ``onset`` (default: ``spec.onset``, see :func:`observable_from`) where an acceptable
    code is among the first ``top`` findings, minus ``onset``; ``None`` when it never is."""
    if spec.family == "healthy":
        return None
    onset = observable_from(spec, last_step) if onset is None else onset
    for step in grid(onset, last_step):
        if any(f.code in spec.acceptable for f in diagnose_at(step).findings[:top]):
            return step - onset
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
    per_code: dict[str, CodeRow]
    ece: float
    calibration: list[tuple[str, float, float, int]]
    median_delay: float | None
    undetected: int
    ece_raw: float = float("nan")
    """The ECE of the raw rule scores (before calibration)."""
    median_delay_share: float | None = None
    """The median detection delay (top-1) as a share of the run's length."""
    median_delay_top3_share: float | None = None
    """The median delay until an acceptable code is among the first three findings, as a share of the run's length."""
    per_arch: dict[str, tuple[float, int]] = field(default_factory=dict)
    """architecture -> (top-1 accuracy, scenarios)."""
    misses: list[str] = field(default_factory=list)

    @property
    def healthy_alarmed(self) -> int:
        """Healthy runs with a warning or critical finding at the end or at any earlier step of the grid."""
        return len({line.split(":")[0] for line in self.healthy_false_alarms + self.healthy_live_alarms})


@dataclass
class CodeRow:
    """One code's line of the per-code table."""

    precision: float | None
    """Of the runs where the code ranked first, the share where it was acceptable."""
    recall: float | None
    """Of the runs of its family, the share where an acceptable code ranked first."""
    n: int
    """Runs of its family."""
    confidence: float | None
    """Mean calibrated confidence when it ranked first."""
    delay_share: float | None
    """Median detection delay (top-1) of its family's runs, as a share of the run's length."""
    delay_top3_share: float | None = None
    """Median delay until an acceptable code is among the first three, of its family's runs, as a share of the run's length."""
    undetected: int = 0
    """Runs of its family where an acceptable code never ranked first on the grid."""


def per_code(outcomes: list[Outcome]) -> dict[str, CodeRow]:
    """code -> its row: precision and confidence when ranked first, recall and delay over its family's runs."""
    codes = sorted({o.spec.family for o in outcomes} | {o.codes[0] for o in outcomes})
    table = {}
    for code in codes:
        predicted = [o for o in outcomes if o.codes[0] == code]
        family = [o for o in outcomes if o.spec.family == code]
        precision = sum(code in o.spec.acceptable for o in predicted) / len(predicted) if predicted else None
        recall = sum(o.top1 for o in family) / len(family) if family else None
        confidence = statistics.fmean(o.confidence for o in predicted) if predicted else None
        delays = [o.delay_share for o in family if o.delay_share is not None]
        top3 = [o.delay_top3_share for o in family if o.delay_top3_share is not None]
        table[code] = CodeRow(precision, recall, len(family), confidence, statistics.median(delays) if delays else None,
                              statistics.median(top3) if top3 else None,
                              sum(o.scanned and o.delay is None for o in family if o.spec.family != "healthy"))
    return table


def calibration(outcomes: list[Outcome], bins: int = BINS,
                raw: bool = False) -> tuple[float, list[tuple[str, float, float, int]]]:
    """Expected calibration error of the top finding's confidence (``raw``: its raw rule score), and the
    (bin, mean confidence, accuracy, n) table, over ``bins`` equal-width bins."""
    rows, ece = [], 0.0

    def conf_of(o: Outcome) -> float:
        return o.raw_confidence if raw else o.confidence

    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [o for o in outcomes if lo <= conf_of(o) < hi or (b == bins - 1 and conf_of(o) >= 1.0)]
        if not members:
            continue
        conf = statistics.fmean(conf_of(o) for o in members)
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
    shares = [o.delay_share for o in scanned if o.delay_share is not None]
    shares3 = [o.delay_top3_share for o in scanned if o.delay_top3_share is not None]
    ece, table = calibration(outcomes)
    archs = sorted({o.spec.architecture for o in outcomes})
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
        ece_raw=calibration(outcomes, raw=True)[0],
        median_delay_share=statistics.median(shares) if shares else None,
        median_delay_top3_share=statistics.median(shares3) if shares3 else None,
        per_arch={a: (statistics.fmean(o.top1 for o in outcomes if o.spec.architecture == a),
                      sum(o.spec.architecture == a for o in outcomes)) for a in archs},
        misses=[f"{o.spec.name}: got {', '.join(o.codes[:3])}; wanted {' or '.join(o.spec.acceptable)}" for o in outcomes if not o.top1],
    )
