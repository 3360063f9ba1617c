"""Confidence from data: each finding's raw rule score mapped to how often such a finding named the cause.

The rules score their findings (``Finding.confidence`` as a rule sets it, then adjusted by the
combiner and the jobs' evidence); those scores rank the findings but are not probabilities.
``calibration.json`` next to this module holds, per code, a monotone table fitted on the
labelled suite's ``tune`` split (``python benchmarks/diagnosis_accuracy.py --fit-calibration``;
how, in ``docs/calibration.md``): raw score -> the share of suite findings of that code with
about that score that named the planted cause. :func:`calibrated` replaces each alarm's
confidence by its table's value (linear between the table's points, flat beyond them) and
keeps the raw score in ``Finding.raw_confidence``. A code without a table of its own uses
the pooled one. Notes (info level) are not calibrated: they are review items, not causes.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from tuidiag.diagnosis.combine import AFTER_FAILURE, SYMPTOM_DISCOUNT
from tuidiag.diagnosis.finding import Finding

TABLE_PATH = Path(__file__).with_name("calibration.json")
POOLED = "*"
"""The table of every code together, for codes without one of their own."""


@lru_cache(maxsize=4)
def load_tables(path: Path = TABLE_PATH) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """code -> (raw scores ascending, calibrated confidences) from the fitted file; raises when it is unusable."""
    document: Any = json.loads(path.read_text(encoding="utf-8"))
    tables = {}
    for code, table in document["tables"].items():
        raw, calibrated_ = np.asarray(table["raw"], dtype=float), np.asarray(table["p"], dtype=float)
        ok = len(raw) == len(calibrated_) and len(raw) > 0 and bool(np.all(np.diff(raw) > 0))
        ok = ok and bool(np.all(np.isfinite(calibrated_)) and np.all((calibrated_ >= 0) & (calibrated_ <= 1)))
        if not ok:
            raise ValueError(f"calibration table of {code!r} is not increasing raw scores with confidences in [0, 1]")
        tables[str(code)] = (raw, calibrated_)
    if POOLED not in tables:
        raise ValueError("calibration file has no pooled table")
    return tables


def confidence_of(code: str, raw: float, tables: dict[str, tuple[np.ndarray, np.ndarray]]) -> float:
    """The calibrated confidence of a finding of ``code`` whose rules scored it ``raw``."""
    xs, ps = tables.get(code, tables[POOLED])
    return float(np.interp(raw, xs, ps))


def calibrated(findings: list[Finding], skipped: list[str], path: Path = TABLE_PATH) -> list[Finding]:
    """New findings: ``findings`` (ranked by the combiner) with calibrated confidences, raw scores kept in
    ``raw_confidence``, most likely first (the findings given are not changed).

    A symptom a finding explains (its ``related``) is never more likely than that cause, and stays
    listed below it: the cause's evidence says so. A speed finding the combiner ranked after a failing
    training (tagged ``AFTER_FAILURE``) stays below the strongest critical finding likewise. Equal confidences keep the combiner's order.
    An unreadable table (``path``) leaves the raw scores and says so in ``skipped``.
    """
    try:
        tables = load_tables(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        skipped.append(f"confidence calibration unreadable ({type(exc).__name__}: {exc}); confidences are raw rule scores")
        return findings
    findings = [f.changed(raw_confidence=f.confidence, confidence=confidence_of(f.code, f.confidence, tables)) for f in findings]
    capped = True  # new findings from here on: the combiner's are left as they were
    while capped:  # a symptom never above its cause, along chains too (each pass lowers a confidence, so this ends)
        capped = False
        for cause in findings:
            for symptom in findings:
                if symptom.code in cause.related and symptom.confidence > cause.confidence:
                    symptom.confidence, capped = cause.confidence, True
    failures = [f.confidence for f in findings if f.severity == "critical" and AFTER_FAILURE not in f.tags]
    for finding in findings:  # a speed finding stays below the failing training's cause whatever the tables say
        if AFTER_FAILURE in finding.tags and failures:
            finding.confidence = min(finding.confidence, max(failures) * SYMPTOM_DISCOUNT)
    order = {id(f): i for i, f in enumerate(findings)}  # the combiner ranks a cause above its symptoms: ties keep that
    return sorted(findings, key=lambda f: (-f.confidence, order[id(f)]))
