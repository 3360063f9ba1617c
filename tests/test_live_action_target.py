"""The monitor's "scale the LR" proposal sets the LR the diagnosis's fixes name, never a factor of its own.

Over generated runs (``tests/cause_runs.py``: every fault that moves the LR, alone and in pairs,
with no LR-finder result, or one that says the LR is too high, too low or fine) and tiny real
trainings (``tests/rootcause_runs.py``: far too high LRs, LR schedules that collapse): wherever
a printed fix names a target LR and an LR change is offered, the LR the action sets (the LR now
times its factor) is that target, and the label names it as the fix prints it. Where no fix
names an LR, the label says where its factor comes from.
"""

from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import cause_runs  # noqa: E402
from tuidiag.action_kinds import MAX_LR_FACTOR, SCALE_LR  # noqa: E402
from tuidiag.diagnosis import Diagnosis, Finding, diagnose  # noqa: E402
from tuidiag.diagnosis.lr_target import LRClause, finder_suggests, scaled  # noqa: E402
from tuidiag.diagnosis.moves import LR_DOWN, LR_UP  # noqa: E402
from tuidiag.diagnosis.view import RunView  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.store.job_results import job_records, save_result  # noqa: E402
from tuidiag.text.numbers import fmt  # noqa: E402
from tuidiag.viewmodel.actions import Proposal, diagnosis_lr_move, finder_suggestion, lr_conflict, propose  # noqa: E402

FAULTS = ("lr_too_high", "lr_too_high_flat", "exploding_gradients", "exploding_from_start", "dead_relu", "over_clipping",
          "loss_spikes", "grad_not_zeroed", "diverged_to_nan", "lr_too_low", "lr_decayed_too_early", "underfitting")
RUNS = [(f,) for f in FAULTS] + list(itertools.combinations(FAULTS, 2))
FINDER = {"none": None, "high": 1 / 20, "low": 20.0, "fine": 1.5}
"""The LR finder's suggestion as a multiple of the run's LR (``None``: no result saved)."""
CHECKED = {"resamples": 32, "low": 1.0, "high": 1.5, "missing": 0, "spread": 1.5, "limit": 3.0}


def _named_targets(diagnosis: Diagnosis) -> set[float]:
    """The target LRs the printed fixes name (from their moves, each clause checked to be printed)."""
    found = set()
    for f in diagnosis.findings + diagnosis.notes:
        for move in (LR_DOWN, LR_UP):
            clause = f.moves.get(move)
            if isinstance(clause, LRClause) and clause in str(f.fix) and clause.lr.target is not None:
                found.add(clause.lr.target)
    return found


def _lr_change(proposals: list[Proposal]) -> Proposal | None:
    return next((p for p in proposals if p.action == SCALE_LR.name), None)


def _check(diagnosis: Diagnosis, lr: float | None, suggested: float | None) -> str:
    """Assert the proposal agrees with the fixes; say which case it was."""
    change = _lr_change(propose(diagnosis, lr, suggested, clipping=False))
    targets = _named_targets(diagnosis)
    assert len(targets) <= 1, targets  # one target per diagnosis (tests/test_lr_target.py)
    shown = [(f.code, str(f.fix)) for f in diagnosis.findings + diagnosis.notes]
    if change is None:
        return "withheld"
    factor = change.args[SCALE_LR.arg]
    if targets and lr:
        [target] = targets
        if 1 / MAX_LR_FACTOR <= target / lr <= MAX_LR_FACTOR:
            assert lr * factor == pytest.approx(target, rel=1e-9), (change.label, shown)
            assert f"-> {fmt(target)})" in change.label and "the fix's target LR" in change.label, change.label
            return "target"
        assert "part of the way" in change.label and f"toward {fmt(target)}" in change.label, change.label
        return "capped"
    assert "no fix names an LR" in change.label or "already past" in change.label or "no finding asks for an LR change" in change.label or "the fix's step" in change.label, change.label
    return "no target"


@pytest.mark.parametrize("faults", RUNS, ids=["+".join(r) for r in RUNS])
def test_the_lr_action_sets_the_fixes_target(tmp_path: Path, faults: tuple[str, ...]) -> None:
    """Each planted run (written once) with each LR-finder result in turn (none, or one saved then removed)."""
    run_dir = cause_runs.write(tmp_path, "run", [(f, at) for f, at in zip(faults, (60, 150))])
    for finder, factor in FINDER.items():
        shutil.rmtree(run_dir / "jobs", ignore_errors=True)
        run = open_run(run_dir)
        lr = RunView(run).lr_now
        if factor is not None and lr:
            save_result(run_dir, "lr_find", {"suggested_lr": lr * factor, "reliable": True, "warning": None,
                                             "stability": CHECKED, "optimizer_lr": lr})
            run = open_run(run_dir)
        _check(diagnose(run, jobs=job_records(run)), lr, finder_suggestion(run_dir))


def test_the_matrix_does_cover_named_targets(tmp_path: Path) -> None:
    """The check above is not vacuous: most runs with an LR fault propose the fix's own target."""
    cases = []
    for faults in RUNS[: len(FAULTS)]:
        run_dir = cause_runs.write(tmp_path / "_".join(faults), "run", [(faults[0], 60)])
        run = open_run(run_dir)
        cases.append(_check(diagnose(run), RunView(run).lr_now, None))
    assert cases.count("target") >= len(FAULTS) // 2, cases


def test_the_lr_finders_target_is_the_actions() -> None:
    """A fix carrying the LR finder's suggestion: the action sets exactly it, and the label says so."""
    move, clause = LR_DOWN, finder_suggests(LR_DOWN, 0.01, 0.3)
    diagnosis = Diagnosis("r", 10, [Finding("lr_too_high", "LR too high", 0.9, "warning", ["e"], str(clause), moves={move: clause})])
    [change, *_] = propose(diagnosis, 0.3, 0.01, clipping=True)
    assert 0.3 * change.args["factor"] == pytest.approx(0.01) and "0.3 -> 0.01" in change.label and "LR finder" in change.label


@pytest.mark.parametrize(("move", "verb", "factor", "lr_now"), [(LR_DOWN, "reduce", 0.1, 0.01), (LR_DOWN, "reduce", 0.1, 0.03),
                                                                (LR_UP, "raise", 3.0, 3.0), (LR_UP, "raise", 3.0, 0.9)])
def test_an_lr_already_past_the_fixes_target_is_not_moved_back(move: object, verb: str, factor: float, lr_now: float) -> None:
    """The fix said 0.3 -> 0.03 (or 0.3 -> 0.9), but the LR has since moved to or past that: the action never
    moves it back the other way, and its label says why it does not take the fix's number."""
    _, clause = scaled(move, verb, 0.3, factor)
    code = "lr_too_high" if move == LR_DOWN else "lr_too_low"
    diagnosis = Diagnosis("r", 10, [Finding(code, code, 0.9, "warning", ["e"], str(clause), moves={move: clause})])
    [change, *_] = propose(diagnosis, lr_now, None, clipping=True)
    assert (change.args["factor"] < 1) == (move == LR_DOWN)
    assert "already past the fixes' target" in change.label, change.label


@pytest.mark.parametrize("lr_now", [None, 0.2])
def test_a_step_only_fix_or_an_unknown_lr(lr_now: float | None) -> None:
    """A fix that names only a step (the LR was unknown) gives that step; with the LR now known, it still does
    (the fix names no LR to reach)."""
    move, clause = scaled(LR_DOWN, "reduce", None, 0.1)
    diagnosis = Diagnosis("r", 10, [Finding("lr_too_high", "LR too high", 0.9, "warning", ["e"], str(clause), moves={move: clause})])
    assert diagnosis_lr_move(diagnosis) == clause.lr
    [change, *_] = propose(diagnosis, lr_now, None, clipping=True)
    assert change.args == {"factor": 0.1} and "the fix's step" in change.label


REAL = [("lr_high", "mlp", "adam", 0.1, {"steps": 200}), ("lr_high", "mlp", "sgd", 0.5, {"steps": 200}),
        ("lr_collapse", "mlp", "sgd", 0.01, {"schedule": "step30", "steps": 250})]


@pytest.mark.parametrize("training", REAL, ids=["-".join(str(a) for a in t[:4]) for t in REAL])
def test_real_trainings_propose_the_fixes_target(tmp_path: Path, training: tuple) -> None:
    pytest.importorskip("torch")
    from rootcause_runs import Training, record

    *args, extra = training
    run_dir = record(Training(*args, **extra), tmp_path / "run")
    run = open_run(run_dir)
    diagnosis = diagnose(run)
    said = _check(diagnosis, RunView(run).lr_now, None)
    assert said == "target" or not _named_targets(diagnosis), said
    if training[0] == "lr_collapse":  # the fix raises the LR floor: no default halving against it
        assert said == "withheld" and "higher LR or LR floor" in str(lr_conflict(diagnosis, RunView(run).lr_now, None))


def test_no_default_halving_against_a_fix_that_raises_the_lr() -> None:
    """A fix that raises the LR or its floor without a number (LR decayed too early, a plain "raise LR"), alone:
    the default halving is not offered, and the reason is given."""
    from tuidiag.diagnosis.moves import MIN_LR_UP

    for move, code in ((MIN_LR_UP, "lr_decayed_too_early"), (LR_UP, "underfitting")):
        finding = Finding(code, code, 0.2, "warning", ["e"], "raise it", moves={move: "raise it"})
        diagnosis = Diagnosis("r", 10, [finding])
        assert not [p for p in propose(diagnosis, 1e-3, None, clipping=True) if p.action == SCALE_LR.name]
        assert code in str(lr_conflict(diagnosis, 1e-3, None))
