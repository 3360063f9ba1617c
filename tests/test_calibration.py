"""Confidence calibration: the fitted tables the package ships, how the engine applies them, how they are fitted.

- the shipped ``calibration.json`` is valid: a pooled table, every table increasing in the
  raw score with confidences strictly between 0 and 1 (no finite sample proves certainty);
- ``calibrated`` on generated ranked findings (hypothesis): raw scores kept, each code's
  mapping monotone, the result ranked most likely first, no symptom above a finding that
  lists it in ``related``; an unreadable table leaves raw scores and says so;
- the fitting (``benchmarks/suite/calibrate.py``): pool adjacent violators against a brute
  force check, shrinkage toward the pooled table, codes whose family no run has get no table;
- ``diagnose`` on real synthetic runs returns calibrated confidences with the raw score kept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from benchmarks.suite import calibrate  # noqa: E402
from synthetic_runs import healthy_series, write_run  # noqa: E402
from tests.conftest import examples
from tuidiag.store import open_run  # noqa: E402
from tuidiag.diagnosis import Finding, diagnose  # noqa: E402
from tuidiag.diagnosis.calibration import POOLED, TABLE_PATH, calibrated, confidence_of, load_tables  # noqa: E402
from tuidiag.diagnosis.codes import CODES  # noqa: E402

ALARM_CODES = sorted(c for c in CODES if c not in ("healthy",))


def test_shipped_tables_are_valid() -> None:
    document = json.loads(TABLE_PATH.read_text())
    tables = load_tables()
    assert POOLED in tables and document["runs"] >= 100 and "tune split" in document["fitted_on"]
    for code, (raw, p) in tables.items():
        assert code == POOLED or code in CODES, code
        assert np.all(np.diff(raw) > 0) and np.all(np.diff(p) >= 0), code
        assert np.all((p > 0) & (p < 1)), code


def _finding(code: str, raw: float, related: list[str]) -> Finding:
    return Finding(code, code, raw, "warning", ["x"], "fix", 0, related=list(related))


@st.composite
def ranked_findings(draw: st.DrawFn) -> list[Finding]:
    """Distinct codes with raw scores, in the combiner's order (highest raw first), some explaining later ones."""
    codes = draw(st.lists(st.sampled_from(ALARM_CODES), min_size=1, max_size=6, unique=True))
    raws = sorted(draw(st.lists(st.floats(0.05, 0.97), min_size=len(codes), max_size=len(codes))), reverse=True)
    found = []
    for i, (code, raw) in enumerate(zip(codes, raws)):
        later = codes[i + 1:]
        related = draw(st.lists(st.sampled_from(later), unique=True, max_size=2)) if later else []
        found.append(_finding(code, raw, related))
    return found


@settings(max_examples=examples(150), deadline=None)
@given(ranked_findings())
def test_calibrated_ranks_most_likely_first_causes_above_symptoms(found: list[Finding]) -> None:
    raw = {f.code: f.confidence for f in found}
    tables = load_tables()
    skipped: list[str] = []
    result = calibrated(found, skipped)
    assert not skipped and sorted(f.code for f in result) == sorted(raw)
    assert [f.confidence for f in result] == sorted((f.confidence for f in result), reverse=True)
    position = {f.code: i for i, f in enumerate(result)}
    for f in result:
        assert f.raw_confidence == raw[f.code]
        assert 0 < f.confidence <= confidence_of(f.code, raw[f.code], tables) + 1e-12
        for symptom in f.related:
            assert position[symptom] > position[f.code]
            assert result[position[symptom]].confidence <= f.confidence


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from([*ALARM_CODES, "healthy", "a_code_never_fitted"]), st.floats(0, 1), st.floats(0, 1))
def test_each_codes_mapping_is_monotone(code: str, a: float, b: float) -> None:
    tables = load_tables()
    lo, hi = sorted((a, b))
    assert confidence_of(code, lo, tables) <= confidence_of(code, hi, tables)


def test_unreadable_table_leaves_raw_scores_and_says_so(tmp_path: Path) -> None:
    bad = tmp_path / "calibration.json"
    bad.write_text('{"tables": {"*": {"raw": [0.5, 0.4], "p": [0.1, 0.2]}}}')
    skipped: list[str] = []
    result = calibrated([_finding("lr_too_high", 0.8, [])], skipped, bad)
    assert result[0].confidence == 0.8 and result[0].raw_confidence is None
    assert len(skipped) == 1 and "raw rule scores" in skipped[0]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0.1, 5)), min_size=1, max_size=12))
def test_pav_is_the_monotone_fit_keeping_the_weighted_mean(pairs: list[tuple[float, float]]) -> None:
    y, w = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    fitted = calibrate.pav(y, w)
    assert np.all(np.diff(fitted) >= -1e-12)
    assert np.isclose(np.sum(fitted * w), np.sum(y * w))
    if np.all(np.diff(y) >= 0):
        assert np.allclose(fitted, y)


def test_fit_shrinks_toward_pooled_and_skips_codes_no_run_has() -> None:
    # lr_too_high is right 3 times of 4 at 0.9; frozen_val_metric fires wrongly, but no run has it as its cause
    runs = [("lr_too_high", [("lr_too_high", 0.9, 1), ("dead_relu", 0.5, 0)]) for _ in range(3)]
    runs += [("dead_relu", [("lr_too_high", 0.9, 0), ("dead_relu", 0.5, 1)]), ("healthy", [("frozen_val_metric", 0.9, 0)])]
    weak, strong = calibrate.fit(runs, 0.5), calibrate.fit(runs, 1e9)
    assert "frozen_val_metric" not in weak and set(strong) == {calibrate.POOLED}
    pooled = strong[calibrate.POOLED]
    assert pooled(0.9) == pytest.approx((3 + 1) / (4 + 2)) and pooled(0.5) == pytest.approx((1 + 1) / (4 + 2))
    own = (3 + 0.5 * pooled(0.9)) / (4 + 0.5)
    assert weak["lr_too_high"](0.9) == pytest.approx(own)
    strength, scores = calibrate.choose_strength(runs)
    assert strength in calibrate.STRENGTHS and set(scores) == set(calibrate.STRENGTHS)


def test_diagnose_returns_calibrated_confidences(tmp_path: Path) -> None:
    healthy = diagnose(open_run(write_run(tmp_path / "healthy", healthy_series())))
    tables = load_tables()
    top = healthy.top
    assert top.code == "healthy" and top.raw_confidence is not None
    assert top.confidence == pytest.approx(confidence_of("healthy", top.raw_confidence, tables))
    assert "raw_confidence" not in top.to_json()
