"""Job results feed the diagnosis: the LR finder sharpens the LR findings, the NaN hunt explains the NaN."""

from __future__ import annotations

import shutil
from pathlib import Path

from tuidiag.diagnosis import diagnose
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.job_evidence import lr_evidence, nan_evidence
from tuidiag.store.job_results import save_result

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"


def _finding(code: str, confidence: float = 0.7, related: list[str] | None = None) -> Finding:
    return Finding(code, code, confidence, "warning", ["curve evidence"], "the rule's fix", 10, related or [])


def test_lr_finder_agreeing_raises_confidence_and_names_the_suggestion() -> None:
    [high] = lr_evidence([_finding("lr_too_high")], {"suggested_lr": 3e-3}, lr_now=3e-2)
    assert high.confidence > 0.7
    assert high.evidence[0].startswith("LR finder: current LR 0.03 is 10x above the suggested 0.003")
    assert high.fix.startswith("set LR to about 0.003")
    assert high.evidence[0].endswith("(rule steepest)")  # a result saved before the rule was named


def test_lr_finder_evidence_names_the_rule_of_the_suggestion() -> None:
    [low] = lr_evidence([_finding("lr_too_low")], {"suggested_lr": 1e-2, "rule": "valley_floor"}, lr_now=1e-4)
    assert low.evidence[0] == "LR finder: current LR 1.00e-04 is 100x below the suggested 0.01 (rule valley_floor)"


def test_lr_finder_disagreeing_lowers_confidence() -> None:
    [high] = lr_evidence([_finding("lr_too_high")], {"suggested_lr": 1e-1}, lr_now=1e-2)
    assert high.confidence < 0.7 and "10x below" in high.evidence[0]
    assert high.fix == "the rule's fix"


def test_lr_finder_alone_raises_a_finding_only_when_far_off() -> None:
    assert lr_evidence([], {"suggested_lr": 1e-3}, lr_now=1e-2) == []
    [low] = lr_evidence([], {"suggested_lr": 1.0}, lr_now=1e-3)
    assert low.code == "lr_too_low" and "1000x below" in low.evidence[0]


def test_lr_finder_without_a_reliable_suggestion_changes_nothing() -> None:
    findings = [_finding("lr_too_high")]
    assert lr_evidence(findings, {"suggested_lr": None}, lr_now=1e-2)[0].evidence == ["curve evidence"]
    assert lr_evidence(findings, {"suggested_lr": 1e-6, "reliable": False}, lr_now=1e-2)[0].evidence == ["curve evidence"]


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
    before = diagnose(run)
    assert before.top.code == "lr_too_high"
    save_result(run, "lr_find", {"suggested_lr": 0.01, "optimizer_lr": 0.3})
    after = diagnose(run)
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
