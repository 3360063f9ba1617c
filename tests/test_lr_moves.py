"""LR moves are structure: no two findings advise opposite moves, and every LR clause is rendered from its move.

Hypothesis composes the labelled-style runs of ``tests/cause_runs.py`` (one to three planted
faults of any code, at chosen steps, on falling, flat or rising losses), with or without a
saved LR-finder result (agreeing that the LR is too high or too low, or within range).
In each diagnosis, alarms and notes together:

- no two findings' fixes move one setting in opposite directions (LR up and down, clipping
  tighter and looser, ...), by their moves and by their printed words;
- every clause that moves the LR is an :class:`~tuidiag.diagnosis.lr_target.LRClause`,
  printed as its move renders it, and no other words of a fix advise an LR change;
- every LR clause that names a number names the same one (the LR finder's where a fix
  carries it).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cause_runs  # noqa: E402
from tests.conftest import examples
from tuidiag.diagnosis import Diagnosis, diagnose  # noqa: E402
from tuidiag.diagnosis.lr_target import LRClause, LRMove  # noqa: E402
from tuidiag.diagnosis.moves import LR_DOWN, LR_UP  # noqa: E402
from tuidiag.diagnosis.view import RunView  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.store.job_results import job_records, save_result  # noqa: E402

CHECKED = {"resamples": 32, "low": 1.0, "high": 1.5, "missing": 0, "spread": 1.5, "limit": 3.0}
FINDER = {"none": None, "high": 1 / 20, "low": 20.0, "fine": 1.5}
"""The LR finder's suggestion as a multiple of the run's LR (``None``: no result saved)."""
LR_WORDS = re.compile(r"\b(?:reduce|lower|raise|set) LR\b")
"""Words that advise an LR change: only an LR clause may hold them."""

plants = st.lists(st.tuples(st.sampled_from(sorted(cause_runs.PLANTS)), st.sampled_from([40, 120, 220])),
                  min_size=1, max_size=3, unique_by=lambda p: p[0])


def _diagnosis(root: Path, planted: list[tuple[str, int]], loss: str, finder: str) -> Diagnosis:
    run_dir = cause_runs.write(root, "run", sorted(planted, key=lambda p: p[1]), loss)
    run = open_run(run_dir)
    lr = RunView(run).lr_now
    if FINDER[finder] is not None and lr:
        save_result(run_dir, "lr_find", {"suggested_lr": lr * FINDER[finder], "reliable": True, "warning": None,
                                         "stability": CHECKED, "optimizer_lr": lr})
        run = open_run(run_dir)
    return diagnose(run, jobs=job_records(run))


def _check(diagnosis: Diagnosis) -> None:
    findings = diagnosis.findings + diagnosis.notes
    shown = [(f.code, str(f.fix)) for f in findings]
    directions: dict[str, set[int]] = {}
    for f in findings:
        for move in f.moves:
            directions.setdefault(move.setting, set()).add(move.direction)
    assert all(len(d) == 1 for d in directions.values()), shown  # no two findings advise opposite moves
    lr_moves: list[LRMove] = []
    for f in findings:
        fix = str(f.fix)
        rest = fix
        for move in (LR_DOWN, LR_UP):
            clause = f.moves.get(move)
            if clause is None:
                continue
            assert isinstance(clause, LRClause), (f.code, clause)  # structured, never hand-written prose
            assert clause == clause.lr.text() and clause in fix, (f.code, clause, fix)  # printed as rendered
            rest = rest.replace(clause, "", 1)
            lr_moves.append(clause.lr)
        assert not LR_WORDS.search(rest), (f.code, fix)  # no LR advice outside the LR clauses
    assert len({m.move for m in lr_moves}) <= 1, shown  # the printed words agree with the moves
    named = {(m.target, None) if m.target is not None else (None, m.step) for m in lr_moves if m.names_change}
    assert len(named) <= 1, shown  # one target LR per diagnosis
    finders = [m for m in lr_moves if m.finder]
    if finders:
        assert named == {(finders[0].target, None)}, shown


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted=plants, loss=st.sampled_from(["falling", "flat", "rising"]), finder=st.sampled_from(sorted(FINDER)))
@example(planted=[("all_frozen", 40), ("exploding_gradients", 40)], loss="falling", finder="fine")  # a frozen model, planted first
def test_no_two_findings_advise_opposite_moves_and_lr_clauses_are_rendered(planted: list[tuple[str, int]], loss: str,
                                                                          finder: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _check(_diagnosis(Path(tmp), planted, loss, finder))


LR_FAULTS = ("lr_too_high", "lr_too_low", "exploding_gradients", "dead_relu", "over_clipping", "loss_spikes", "nonfinite_loss",
             "diverged_to_nan", "underfitting", "grad_not_zeroed")


@pytest.mark.parametrize("finder", sorted(FINDER))
@pytest.mark.parametrize("fault", LR_FAULTS)
def test_every_fault_that_moves_the_lr_alone_and_with_each_finder_result(tmp_path: Path, fault: str, finder: str) -> None:
    """The matrix the property samples from, on the faults whose fixes move the LR: each alone, with each finder result."""
    _check(_diagnosis(tmp_path, [(fault, 120)], "falling", finder))


@pytest.mark.parametrize(("lr", "factor", "text"), [
    (0.3, 0.1, "reduce LR from 0.3 to about 0.03 (3-10x lower)"),
    (None, 0.1, "reduce LR by about 10x (3-10x lower)"),
    (0.0, 0.3, "reduce LR by about 3x (3-10x lower)"),
])
def test_a_clause_is_rendered_from_its_move_and_retargeted_from_another(lr: float | None, factor: float, text: str) -> None:
    from tuidiag.diagnosis.lr_target import finder_suggests, scaled

    move, clause = scaled(LR_DOWN, "reduce", lr, factor, " (3-10x lower)")
    assert move == LR_DOWN and clause == text
    finder = finder_suggests(LR_DOWN, 0.01, 0.3)
    assert finder == "set LR to about 0.01 (LR finder), from 0.3"
    aimed = LRClause(clause.lr.aimed_at(finder.lr))
    assert aimed == ("reduce LR from 0.3 to about 0.01 (3-10x lower)" if lr else "reduce LR to about 0.01 (3-10x lower)")
