"""Job results feed the diagnosis: the LR finder is one piece of evidence weighed against the curves,
the NaN hunt explains the NaN; the live action proposal follows only evidence that does not conflict."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run
from tuidiag.diagnosis.combine import combine
from tuidiag.diagnosis.finding import Diagnosis, Finding
from tuidiag.diagnosis.job_evidence import FINDER_ONLY, WELL_SUPPORTED, finder_verdict, lr_evidence, nan_evidence
from tuidiag.viewmodel.actions import lr_conflict, propose
from tuidiag.store.job_results import job_records, save_result

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"
CHECKED = {"resamples": 32, "low": 1.0, "high": 1.5, "missing": 0, "spread": 1.5, "limit": 3.0}


def _finding(code: str, confidence: float = 0.7, related: list[str] | None = None) -> Finding:
    return Finding(code, code, confidence, "warning", ["curve evidence"], "the rule's fix", 10, related or [])


def _result(suggested: float | None, reliable: bool = True, **extra: Any) -> dict[str, Any]:
    """An LR-finder result as the job writes it (stability checked)."""
    warning = None if reliable else "unreliable: over 32 resamples of the batch noise the middle 80% of suggestions spans 6.4e-07..0.038"
    return {"suggested_lr": suggested, "reliable": reliable, "warning": warning, "stability": CHECKED, **extra}


def test_lr_finder_agreeing_raises_confidence_and_names_the_suggestion() -> None:
    [high] = lr_evidence([_finding("lr_too_high")], _result(3e-3), lr_now=3e-2)
    assert high.confidence > 0.7
    assert high.evidence[0].startswith("LR finder: current LR 0.03 is 10x above the suggested 0.003")
    assert high.fix.startswith("set LR to about 0.003")
    assert high.evidence[0].endswith("(rule steepest: steepest descent of loss vs LR)")  # saved before the rule was named


def test_lr_finder_evidence_names_the_rule_of_the_suggestion() -> None:
    [low] = lr_evidence([_finding("lr_too_low")], _result(1e-2, rule="valley_floor"), lr_now=1e-4)
    assert low.evidence[0].startswith("LR finder: current LR 1.00e-04 is 100x below the suggested 0.01 (rule valley_floor: ")


def test_lr_finder_disagreeing_lowers_a_weak_finding_a_little() -> None:
    [high] = lr_evidence([_finding("lr_too_high", 0.6)], _result(1e-1), lr_now=1e-2)
    assert 0.6 * 0.75 < high.confidence < 0.6 and "10x below" in high.evidence[0] and "disagrees" in high.evidence[0]
    assert high.fix == "the rule's fix"


def test_lr_finder_disagreeing_leaves_a_well_supported_finding_as_it_was() -> None:
    [high] = lr_evidence([_finding("lr_too_high", 0.87)], _result(0.29), lr_now=0.5)
    assert high.confidence == 0.87 and high.evidence[0] == "curve evidence"
    assert "within 3x" in high.evidence[-1] and "does not outweigh the curves" in high.evidence[-1]
    assert high.fix == "the rule's fix"


def test_lr_finder_alone_raises_a_weak_finding_only_when_far_off_and_moves_the_lr_at_most_10x() -> None:
    assert lr_evidence([], _result(1e-3), lr_now=1e-2) == []
    [low] = lr_evidence([], _result(1.0), lr_now=1e-3)
    assert low.code == "lr_too_low" and "1000x below" in low.evidence[0]
    assert low.confidence < 0.5 and FINDER_ONLY in low.tags
    assert low.fix.startswith("raise LR 10x (LR finder), from 0.001 to 0.01") and "1.0" not in low.fix


def test_lr_finder_without_a_reliable_suggestion_changes_nothing_but_says_why() -> None:
    findings = [_finding("lr_too_high")]
    assert lr_evidence(findings, _result(None), lr_now=1e-2)[0].evidence == ["curve evidence"]
    [high] = lr_evidence([_finding("lr_too_high")], _result(1e-6, reliable=False), lr_now=1e-2)
    assert high.confidence == 0.7 and high.fix == "the rule's fix"
    assert high.evidence[-1].startswith("LR finder result not used: unreliable: over 32 resamples")
    [old] = lr_evidence([_finding("lr_too_high")], {"suggested_lr": 1e-6, "reliable": True}, lr_now=1e-2)
    assert old.confidence == 0.7 and "without the stability check" in old.evidence[-1]


# ---- the matrix: curve finding strength x finder result ---------------------------------------

LR = 0.5
CURVES: dict[str, list[Finding]] = {
    "none": [],
    "weak_high": [Finding("lr_too_high", "Learning rate too high", 0.6, "warning", ["curves"], "reduce LR", 10)],
    "strong_high": [Finding("lr_too_high", "Learning rate too high", 0.87, "warning", ["curves"], "reduce LR", 10)],
    "weak_low": [Finding("lr_too_low", "Learning rate too low", 0.5, "warning", ["curves"], "raise LR", 0)],
    "strong_low": [Finding("lr_too_low", "Learning rate too low", 0.9, "warning", ["curves"], "raise LR", 0)],
}
"""What the curves alone found (fixes without figures: any LR figure in a fix comes from the finder)."""
CURVE_DIRECTION = {"none": None, "weak_high": "down", "strong_high": "down", "weak_low": "up", "strong_low": "up"}
FINDER: dict[str, dict[str, Any]] = {
    "agree_high": _result(LR / 10),  # the LR is 10x too high
    "within_3x": _result(LR / 1.7),
    "far_below": _result(LR * 100),  # the LR is 100x below the suggestion
    "far_above": _result(LR / 100),
    "unreliable": _result(LR / 1000, reliable=False),
    "agree_low": _result(LR * 10),
}
FINDER_DIRECTION = {"agree_high": "down", "within_3x": "fine", "far_below": "up", "far_above": "down", "unreliable": None, "agree_low": "up"}
COMPETITORS = [0.55, 0.74, 0.85]
"""Confidence of an unrelated finding competing for the top (data loading, as in the issue's example)."""


def _combined(curves: str, finder: str, competitor: float) -> list[Finding]:
    found = [Finding(f.code, f.title, f.confidence, f.severity, list(f.evidence), f.fix, f.first_step) for f in CURVES[curves]]
    found.append(Finding("data_loading_bottleneck", "Data loading is the bottleneck", competitor, "warning", ["waits"], "more workers", 0))
    return combine(lr_evidence(found, dict(FINDER[finder]), LR))


def _targets(fix: str) -> list[float]:
    """The LRs a fix proposes ("to about X", "to X")."""
    return [float(v) for v in re.findall(r"\bto (?:about )?([0-9][0-9.]*(?:e[-+]?[0-9]+)?)", fix)]


def _conflicts(curves: str, finder: str) -> bool:
    curve, said = CURVE_DIRECTION[curves], FINDER_DIRECTION[finder]
    if curve == "down":
        return said in ("up", "fine")
    if curve == "up":
        return said in ("down", "fine")
    return said == "up"


MATRIX = list(itertools.product(CURVES, FINDER, COMPETITORS))


@pytest.mark.parametrize("curves,finder,competitor", MATRIX)
def test_a_well_supported_finding_is_never_demoted_by_an_unreliable_or_conflicting_sweep(curves: str, finder: str, competitor: float) -> None:
    before = CURVES[curves][0] if CURVES[curves] else None
    ranked = _combined(curves, finder, competitor)
    if before is None or before.confidence < WELL_SUPPORTED:
        return
    after = next(f for f in ranked if f.code == before.code)
    agrees = CURVE_DIRECTION[curves] == FINDER_DIRECTION[finder]
    assert after.confidence >= before.confidence
    assert ranked[0].code == before.code  # stays on top of a competitor it led before
    assert not agrees or "LR finder" in after.evidence[0]
    assert {f.code for f in ranked} <= {before.code, "data_loading_bottleneck"}  # no opposite finding from the sweep


@pytest.mark.parametrize("curves,finder,competitor", MATRIX)
def test_no_fix_moves_the_lr_more_than_10x_without_the_curves(curves: str, finder: str, competitor: float) -> None:
    for finding in _combined(curves, finder, competitor):
        for target in _targets(finding.fix):
            far = max(target / LR, LR / target) > 10
            direction = "down" if target < LR else "up"
            supported = FINDER_ONLY not in finding.tags and CURVE_DIRECTION[curves] == direction == FINDER_DIRECTION[finder]
            assert not far or supported, (finding.code, finding.fix)


def test_the_matrix_does_propose_figures() -> None:
    """The fix check above is not vacuous: the sweep's figures reach the fixes where the evidence allows."""
    assert _targets(_combined("strong_high", "far_above", 0.5)[0].fix) == [LR / 100]
    alone = next(f for f in _combined("none", "far_above", 0.5) if f.code == "lr_too_high")
    assert _targets(alone.fix) == [LR / 10]


@pytest.mark.parametrize("curves,finder", list(itertools.product(CURVES, FINDER)))
def test_the_action_proposal_is_withheld_when_the_evidence_conflicts(curves: str, finder: str) -> None:
    from tuidiag.diagnosis.job_evidence import reliable_suggestion

    diagnosis = Diagnosis("r", 100, _combined(curves, finder, 0.55))
    suggested = reliable_suggestion(FINDER[finder])
    proposals = propose(diagnosis, LR, suggested, clipping=True)
    lr_changes = [p for p in proposals if p.action == "scale_lr"]
    assert proposals[-1].action == "checkpoint"
    if _conflicts(curves, finder):
        assert lr_changes == [] and lr_conflict(diagnosis, LR, suggested)
        return
    assert lr_conflict(diagnosis, LR, suggested) is None
    [change] = lr_changes
    factor = change.args["factor"]
    wanted = CURVE_DIRECTION[curves] or FINDER_DIRECTION[finder] or "down"
    assert (factor < 1) == (wanted in ("down", "fine"))  # no finding at all: the plain halving
    if max(factor, 1 / factor) > 10:
        assert CURVE_DIRECTION[curves] == FINDER_DIRECTION[finder]


def test_finder_verdict_thresholds() -> None:
    assert finder_verdict(3e-2, 1e-2) == "high" and finder_verdict(1e-2, 3e-2) == "low"
    assert finder_verdict(2.9e-2, 1e-2) == "fine" and finder_verdict(1e-2, 2.9e-2) == "fine"


# ---- the NaN hunt and the engine ---------------------------------------------------------------

def test_nan_hunt_culprit_becomes_evidence_of_the_finding_that_explains_the_nan() -> None:
    result = {"verdict": "forward", "summary": "forward pass: module head produced NaN (op log)", "module": "head",
              "op": "torch.log", "step": 254}
    top = _finding("lr_too_high", related=["nonfinite_loss"])
    [found] = nan_evidence([top], result)
    assert found.evidence[0] == "NaN hunt (step 254): forward pass: module head produced NaN (op log)"
    assert found.fix.startswith("guard the operation torch.log in head")


def test_nan_hunt_without_capture_is_not_evidence() -> None:
    [found] = nan_evidence([_finding("nonfinite_loss")], {"verdict": "no_capture", "summary": "no NaN capture"})
    assert found.evidence == ["curve evidence"]


def test_diagnose_reads_the_runs_job_results(tmp_path: Path) -> None:
    run = tmp_path / "lr-too-high"
    shutil.copytree(DEMO / "lr-too-high", run)
    before = diagnose(open_run(run))  # no result saved yet
    assert before.top.code == "lr_too_high"
    save_result(run, "lr_find", _result(0.01, optimizer_lr=0.3))
    loaded = open_run(run)
    after = diagnose(loaded, jobs=job_records(loaded))
    assert after.top.code == "lr_too_high"
    assert after.top.evidence[0].startswith("LR finder: current LR 0.3 is 30x above the suggested 0.01")
    assert after.top.confidence >= before.top.confidence


def test_a_value_written_on_purpose_is_not_to_be_guarded() -> None:
    """The NaN hunt found only a -inf passed in by masked_fill reaching the loss: the fix says so."""
    result = {"verdict": "forward", "summary": "forward pass: no op created a non-finite value on its own",
              "module": "attn", "op": "masked_fill", "created": False, "step": 9}
    [found] = nan_evidence([_finding("nonfinite_loss")], result)
    assert found.fix.startswith("keep the non-finite value that masked_fill in attn writes on purpose")
    assert "guard the operation" not in found.fix


def _underfitting_run(path: Path) -> Path:
    """A recorded run whose losses plateau high and close together (the underfitting rule fires), at an LR so
    low that nothing moves: what a too-low LR looks like."""
    import numpy as np

    import tuidiag

    rng = np.random.default_rng(0)
    with tuidiag.Recorder(path, flush_interval=0.1) as rec:
        for i in range(400):
            rec.step(1.386 + 0.002 * rng.standard_normal())
            if i % 25 == 0:
                rec.log({"val/loss": 1.387 + 0.001 * rng.standard_normal()})
    return path


OVERFIT = {"passed": True, "informative": True, "optimizer": "adam", "lr": 0.001, "steps": 78,
           "initial_loss": 1.39, "final_loss": 0.0099, "reason": "target reached"}


@pytest.mark.parametrize(("result", "counts"), [
    (OVERFIT, True),
    ({**OVERFIT, "optimizer": "run", "lr": 1e-6}, True),
    ({**OVERFIT, "steps": None, "initial_loss": None}, True),  # figures missing: the line says what it has
    ({**OVERFIT, "passed": False, "reason": "did not reach the target"}, False),
    ({**OVERFIT, "informative": False}, False),
    ({"passed": "yes"}, False),  # not a result this job writes
])
def test_a_passed_overfit_one_batch_takes_the_capacity_advice_back(tmp_path: Path, result: dict, counts: bool) -> None:
    """A model that fit one batch has the capacity to fit data: the underfitting finding no longer advises more
    capacity, says why, and gives the job's figures as evidence; a failed or uninformative job changes nothing."""
    run_dir = _underfitting_run(tmp_path / "r")
    before = diagnose(open_run(run_dir))
    (under,) = [f for f in before.findings + before.notes if f.code == "underfitting"]
    assert "increase capacity" in str(under.fix)
    save_result(run_dir, "overfit_batch", dict(result))
    run = open_run(run_dir)
    after = diagnose(run, jobs=job_records(run))
    (under,) = [f for f in after.findings + after.notes if f.code == "underfitting"]
    fix, lines = str(under.fix), [str(e) for e in under.evidence]
    if counts:
        assert "increase capacity" not in fix and "not increasing capacity: the model fit one batch" in fix
        assert not any(m.setting == "capacity" for m in under.moves)
        (line,) = [e for e in lines if e.startswith("overfit-one-batch passed")]
        assert f"at LR {result['lr']:g}" in line or "at LR 1.00e-06" in line
        assert ("in 78 steps" in line) == (result.get("steps") == 78)
    else:
        assert "increase capacity" in fix and not any("overfit-one-batch" in e for e in lines)


@pytest.mark.parametrize("lr", [1e-7, 1e-6, 3e-4, None])
@pytest.mark.parametrize("ratio", [2e-4, 1e-4, 9.9e-5, 1e-5, 4.4e-8, 1e-9])
def test_the_too_low_lr_fix_raises_by_what_the_update_ratio_is_short(lr: float | None, ratio: float) -> None:
    """The raise the fix names brings the update/weight ratio to a healthy 1e-3 (an update grows about in
    proportion to the LR), at least 10x and at most 1,000x; the note says the factor and the gap."""
    from tuidiag.diagnosis.evidence import Measure
    from tuidiag.diagnosis.rules.lr import HEALTHY_RATIO, MAX_RAISE, _raise_clause

    _, clause = _raise_clause(lr, Measure("update_ratio/w", 0, 99, "median", ratio))
    factor = min(max(HEALTHY_RATIO / ratio, 10.0), MAX_RAISE)
    if lr is not None:
        assert clause.lr.target == pytest.approx(lr * factor) and clause.lr.current == lr
    else:
        assert clause.lr.target is None and clause.lr.step == pytest.approx(factor)
    if HEALTHY_RATIO / ratio > 10:
        assert f"{factor:,.0f}x: the update/weight ratio is {HEALTHY_RATIO / ratio:,.0f}x below" in clause
        assert ("at most 1,000x at once" in clause) == (HEALTHY_RATIO / ratio > MAX_RAISE)
    else:
        assert "(2-10x higher)" in clause
