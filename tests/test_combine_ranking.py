"""A failing training's cause ranks above a speed finding, and grad_not_zeroed above the LR symptoms it explains.

Generated runs (``tests/cause_runs.py``): each critical fault planted together with a slow
loop (the time between steps 80% of each step) from several onsets, before and after the
fault. The fault's finding must lead, every speed finding must sit strictly below every
critical finding about the training, and the two must never print the same percentage
(no ">99%" tie between a NaN loss and a slow loop). Zero_grad missing from the first
steps, with an overshooting LR's signature planted from a few steps on, must lead and
claim it. Every evidence line is checked against the run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import cause_runs  # noqa: E402
from evidence_checker import check_diagnosis  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.diagnosis.combine import EXPLAINS, SPEED_CODES  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.text.numbers import confidence as confidence_text  # noqa: E402

FAULTS = ("nonfinite_loss", "diverged_to_nan", "grad_not_zeroed", "bad_input_data")
CASES = [(fault, fault_at, slow_at) for fault in FAULTS for fault_at, slow_at in ((0, 0), (60, 0), (60, 200), (150, 30))]


@pytest.mark.parametrize(("fault", "fault_at", "slow_at"), CASES, ids=[f"{f}-{a}-{s}" for f, a, s in CASES])
def test_failure_outranks_slow_loop(tmp_path: Path, fault: str, fault_at: int, slow_at: int) -> None:
    run_dir = cause_runs.write(tmp_path, "run", [(fault, fault_at), ("data_loading_bottleneck", slow_at)])
    diagnosis = diagnose(open_run(run_dir))
    check_diagnosis(run_dir, diagnosis)
    codes = [f.code for f in diagnosis.findings]
    assert "data_loading_bottleneck" in codes, codes
    failures = [f for f in diagnosis.findings if f.severity == "critical" and f.code not in SPEED_CODES]
    assert failures, codes
    assert diagnosis.top.code not in SPEED_CODES, codes
    strongest = max(failures, key=lambda f: f.confidence)
    for slow in (f for f in diagnosis.findings if f.code in SPEED_CODES):
        assert slow.confidence < strongest.confidence, (slow.code, slow.confidence, strongest.code, strongest.confidence)
        assert confidence_text(slow.confidence) != confidence_text(strongest.confidence), (slow.confidence, strongest.confidence)
        assert diagnosis.findings.index(slow) > diagnosis.findings.index(strongest)
        assert any("does not explain a failing training" in str(line) for line in slow.evidence)


@pytest.mark.parametrize("slow_at", [0, 100])
def test_slow_loop_alone_keeps_its_rank(tmp_path: Path, slow_at: int) -> None:
    """The near miss: a slow loop with nothing failing still leads, at its own confidence."""
    diagnosis = diagnose(open_run(cause_runs.write(tmp_path, "run", [("data_loading_bottleneck", slow_at)])))
    assert diagnosis.top.code == "data_loading_bottleneck"
    assert not any("failing training" in str(line) for line in diagnosis.top.evidence)


@pytest.mark.parametrize("lr_at", [3, 8, 20, 60])
def test_zero_grad_missing_claims_the_lr_symptom(tmp_path: Path, lr_at: int) -> None:
    """Zero_grad missing from the start: the probe first samples step 10, yet the LR symptom seen from step ``lr_at`` is its."""
    run_dir = cause_runs.write(tmp_path, "run", [("grad_not_zeroed", 0), ("lr_too_high", lr_at)])
    diagnosis = diagnose(open_run(run_dir))
    check_diagnosis(run_dir, diagnosis)
    codes = [f.code for f in diagnosis.findings]
    assert codes[0] == "grad_not_zeroed", codes
    if "lr_too_high" in codes:
        assert "lr_too_high" in diagnosis.top.related, (codes, diagnosis.top.related)


@pytest.mark.parametrize("cause_code", sorted(c for c, symptoms in EXPLAINS.items() if "loss_spikes" in symptoms))
def test_spikes_a_cause_explains_are_not_blamed_on_atypical_batches(cause_code: str) -> None:
    """Loss spikes listed under the cause that explains them (an LR too high throws the loss for a step or two) no
    longer say "atypical batches" in their title, the cause's "also seen" line names them as titled, and their fix
    sends to the cause first; spikes no finding explains keep their own reading."""
    from tuidiag.diagnosis.combine import combine
    from tuidiag.diagnosis.finding import Finding
    from tuidiag.diagnosis.moves import CLIP_TIGHTER, fix_text

    spikes = Finding("loss_spikes", "Loss spikes that recover (atypical batches)", 0.8, "warning", ["5 spikes"],
                     fix_text("inspect the batches at those steps (corrupt or mislabeled samples)", (CLIP_TIGHTER, "clip gradients"),
                              "consider a robust loss (Huber)"), 40)
    cause = Finding(cause_code, cause_code.replace("_", " ").capitalize(), 0.9, "critical", ["the cause"], "the cause's fix", 10,
                    tags={"severe", "from_start"})
    out = {f.code: f for f in combine([cause, spikes])}
    explained = "loss_spikes" in out[cause_code].related
    title, fix = out["loss_spikes"].title, str(out["loss_spikes"].fix)
    if explained:
        assert "atypical" not in title and fix.startswith("they follow from the cause they are listed under: fix that first")
        assert f"also seen: {title} (listed below)" in [str(e) for e in out[cause_code].evidence]
        assert "inspect the batches" in fix.split("fix that first", 1)[1]  # still offered, after the cause
    else:
        assert title == spikes.title and fix == str(spikes.fix)
    alone = combine([spikes])[0]
    assert alone.title == spikes.title and str(alone.fix) == str(spikes.fix)


@pytest.mark.parametrize("cause_code", sorted(c for c, symptoms in EXPLAINS.items() if "underfitting" in symptoms))
def test_underfitting_a_cause_explains_sends_to_the_cause_before_capacity(cause_code: str) -> None:
    """Underfitting listed under the cause that explains it (an LR too low barely moving the weights) no longer leads
    with "increase capacity": its fix sends to the cause first and keeps capacity, regularization and the LR for
    after it (the combiner then drops an LR clause that opposes the cause's); underfitting no finding explains keeps
    its own fix."""
    from tuidiag.diagnosis.combine import combine
    from tuidiag.diagnosis.finding import Finding
    from tuidiag.diagnosis.lr_target import plain
    from tuidiag.diagnosis.moves import CAPACITY_UP, LR_UP, REG_DOWN, fix_text

    own = fix_text((CAPACITY_UP, "increase capacity (wider/deeper model)"), (REG_DOWN, "reduce regularization"),
                   plain(LR_UP, "raise"), "check that labels match inputs")
    under = Finding("underfitting", "Underfitting: both losses plateau high", 0.65, "warning", ["plateau"], own, 300)
    cause = Finding(cause_code, cause_code.replace("_", " ").capitalize(), 0.9, "critical", ["the cause"], "the cause's fix", 0,
                    tags={"severe", "from_start"})
    out = {f.code: f for f in combine([cause, under])}
    fix = str(out["underfitting"].fix)
    if "underfitting" in out[cause_code].related:
        assert fix.startswith("fix the cause it is listed under first, and if both losses still plateau after that: "
                              "increase capacity (wider/deeper model)"), fix
        assert {CAPACITY_UP, REG_DOWN, LR_UP} == set(out["underfitting"].moves)
    else:
        assert fix == str(own)
    assert str(combine([under])[0].fix) == str(own)
