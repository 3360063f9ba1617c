"""Evidence is true, fixes never contradict each other: checked over a generated matrix of runs, short ones included.

The matrix (``tests/evidence_runs.py``): 9 lengths (1 to 1000 steps) x 7 loss shapes x 2
planted conditions = 126 single-rank runs, plus 12 three-rank runs; each long run
diagnosed at its end and, from 20 steps, also at its middle step (time travel). Every
evidence line of every finding and note is checked by ``tests/evidence_checker.py``,
which recomputes each line's structured claims from the raw run. The same diagnoses
must never advise opposite moves on one setting, judged both by the fixes' tags and by
their words. The issue's four examples are kept as regression tests, recorded through
the public ``Recorder`` API.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import evidence_runs  # noqa: E402
from evidence_checker import check_diagnosis, fix_moves_in_text  # noqa: E402
from tuidiag import Recorder  # noqa: E402
from tuidiag.diagnosis import Diagnosis, Finding, diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.diagnosis.codes import CODES  # noqa: E402
from tuidiag.diagnosis.moves import LR_DOWN, LR_UP, fix_text  # noqa: E402
from tuidiag.diagnosis.combine import resolve_fix_conflicts  # noqa: E402
from tuidiag.diagnosis.evidence import Change, Evidence  # noqa: E402
from tuidiag.text.numbers import confidence  # noqa: E402

MATRIX = {case.name: case for case in evidence_runs.cases()}
RANK_RUNS = {f"ranks-{kind}-{n}": (kind, n) for kind in evidence_runs.RANK_CASES for n in evidence_runs.RANK_LENGTHS}
IMPORTED_RUNS = {"imported-tensorboard": ("tensorboard", 40), "imported-csv-short": ("csv (lightning)", 3)}
"""Runs another tracker wrote (imported as ``tuidiag import`` writes them): loss and LR only."""
Diagnosed = dict[str, list[tuple[Path, Diagnosis, "int | None"]]]


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory: pytest.TempPathFactory) -> Diagnosed:
    """Every generated run, written once and diagnosed at its end (and at its middle step from 20 steps)."""
    root = tmp_path_factory.mktemp("evidence")
    out: Diagnosed = {}
    for name, case in MATRIX.items():
        run = evidence_runs.write_case(root, case)
        ats = [None] + ([case.n // 2] if case.n >= 20 else [])
        out[name] = [(run, diagnose(open_run(run), at=at), at) for at in ats]
    for name, (kind, n) in RANK_RUNS.items():
        run = evidence_runs.write_rank_case(root, kind, n)
        out[name] = [(run, diagnose(open_run(run)), None)]
    for name, (source, n) in IMPORTED_RUNS.items():
        run = _imported(root / "imported", name, source, n)
        out[name] = [(run, diagnose(open_run(run)), None)]
    return out


def _imported(out: Path, name: str, source: str, n: int) -> Path:
    from tuidiag.importers import SourceRun, SourceSeries, write_run

    steps = list(range(n))
    series = [SourceSeries.from_lists("Loss/train", steps, [1.0 / (s + 1) for s in steps], [1e9 + s for s in steps]),
              SourceSeries.from_lists("learning_rate", steps, [0.01] * n, [1e9 + s for s in steps])]
    return write_run(SourceRun(Path(name), series, {"format": source, "path": "/logs"}), out).path


def _all_findings(diagnosis: Diagnosis) -> list[Finding]:
    return diagnosis.findings + diagnosis.notes


@pytest.mark.parametrize("name", [*MATRIX, *RANK_RUNS, *IMPORTED_RUNS])
def test_every_evidence_line_is_true(name: str, diagnosed: Diagnosed) -> None:
    for run, diagnosis, at in diagnosed[name]:
        assert check_diagnosis(run, diagnosis, at) >= 1


@pytest.mark.parametrize("name", [*MATRIX, *RANK_RUNS])
def test_no_two_findings_give_opposite_fixes(name: str, diagnosed: Diagnosed) -> None:
    for _, diagnosis, _ in diagnosed[name]:
        findings = _all_findings(diagnosis)
        for judge in (lambda f: set(f.moves), lambda f: fix_moves_in_text(f.fix)):
            moves = [(f.code, m) for f in findings for m in judge(f)]
            clashes = [(a, b) for a, m in moves for b, n in moves if m.opposes(n)]
            assert not clashes, [(f.code, f.fix) for f in findings]


@pytest.mark.parametrize("demo", sorted(p.name for p in (ROOT / "demo_runs").iterdir() if (p / "run.json").exists()))
def test_the_demo_runs_evidence_is_true(demo: str) -> None:
    """The committed demo runs are real recordings (``tuidiag demo``): their evidence too, at the end and half-way."""
    run = ROOT / "demo_runs" / demo
    end = diagnose(open_run(run))
    assert check_diagnosis(run, end) >= 1
    half = (end.step or 0) // 2
    check_diagnosis(run, diagnose(open_run(run), at=half), half)


def test_the_matrix_reaches_every_rule_and_short_runs(diagnosed: Diagnosed) -> None:
    fired = {f.code for runs in diagnosed.values() for _, d, _ in runs for f in _all_findings(d)}
    detected = {name for name, code in CODES.items() if code.detected} - {"unreadable"}  # no data: test_foreign_unreadable
    assert fired == detected, f"never fired: {sorted(detected - fired)}"
    short = [d for name, runs in diagnosed.items() if name in MATRIX and MATRIX[name].n <= 11 for _, d, _ in runs]
    added = sum(1 for case in evidence_runs.ADDED_CASES if case.n <= 11)
    assert len(short) == 6 * 7 * 2 + added and all(f.evidence for d in short for f in _all_findings(d))
    conflicts = [f for runs in diagnosed.values() for _, d, _ in runs for f in _all_findings(d) if "conflicts with" in f.fix]
    assert conflicts, "no generated run exercised the conflict resolution"


def test_fix_words_carry_their_tags(diagnosed: Diagnosed) -> None:
    """A fix that says "raise LR" (or clip, regularize, ...) is tagged with that move, so the combiner sees it."""
    for runs in diagnosed.values():
        for _, diagnosis, _ in runs:
            for finding in _all_findings(diagnosis):
                assert fix_moves_in_text(finding.fix) <= set(finding.moves), (finding.code, finding.fix, finding.moves)


def test_the_catalog_is_the_one_place_findings_are_declared() -> None:
    with pytest.raises(ValueError, match="not declared"):
        Finding("brand_new_rule", "New", 0.5, "warning", [], "do something", None)
    with pytest.raises(ValueError, match="does not list"):
        Finding("dead_layer", "Dead", 0.5, "warning", [], fix_text((LR_UP, "raise LR")), None)
    untagged = Finding("lr_too_low", "Low", 0.5, "warning", [], "raise LR 10x", None)
    assert untagged.moves == {LR_UP: "raise LR 10x"}, "a plain-text fix makes every move its catalog entry lists"


def _finding(code: str, confidence: float, fix: str, severity: str = "warning", related: list[str] | None = None) -> Finding:
    return Finding(code, code, confidence, severity, [], fix, None, related or [])


def test_resolution_keeps_the_better_supported_fix_and_says_why() -> None:
    high = _finding("lr_too_high", 0.87, fix_text((LR_DOWN, "reduce LR 10x"), "add warmup"))
    low = _finding("underfitting", 0.6, fix_text("increase capacity", (LR_UP, "raise LR")))
    given = (low.fix, dict(low.moves))
    low_after, high_after = resolve_fix_conflicts([low, high])
    assert low_after.fix == "increase capacity; not raising the LR: conflicts with lr_too_high (87%)"  # titled by its code here
    assert high_after.fix == "reduce LR 10x; add warmup" and LR_UP not in low_after.moves
    assert (low.fix, low.moves) == given, "the findings given are left as they were"
    cause = _finding("dead_relu", 0.5, fix_text((LR_DOWN, "lower LR")), related=["lr_too_low"])
    symptom = _finding("lr_too_low", 0.8, "raise LR 10x")
    note = _finding("overparameterized", 0.9, fix_text("watch validation"), severity="info")
    cause, symptom, _ = resolve_fix_conflicts([cause, symptom, note])
    assert cause.fix == "lower LR", "the cause keeps its fix though the symptom is more confident"
    assert symptom.fix == "not raising the LR: conflicts with dead_relu (50%)" and not symptom.moves


# ---- the examples, recorded through the public Recorder API -----------------------------------------------


def _record(run_dir: Path, losses: np.ndarray, logs: dict[str, np.ndarray] | None = None, every: dict[str, int] | None = None,
            config: dict | None = None) -> Path:
    with Recorder(run_dir, config=config or {}) as rec:
        for i, loss in enumerate(losses.tolist()):
            rec.step(loss)
            rec.log({k: float(v[i]) for k, v in (logs or {}).items() if i % (every or {}).get(k, 1) == 0})
    return run_dir


def _lines(diagnosis: Diagnosis) -> list[str]:
    return [line for f in _all_findings(diagnosis) for line in f.evidence]


def test_ten_step_run_compares_two_disjoint_halves(tmp_path: Path) -> None:
    """Was "loss 1.14 -> 1.14 over 10 steps": the first-10 and last-10 medians were the same 10 values."""
    losses = np.array([1.228, 1.21, 1.19, 1.16, 1.15, 1.13, 1.12, 1.10, 1.09, 1.077])
    run = _record(tmp_path / "ten", losses)
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    line = diagnosis.top.evidence[0]
    assert isinstance(line, Evidence) and line.startswith("loss fell")
    change = next(c for c in line.claims if isinstance(c, Change))
    assert (change.before.first, change.before.last, change.after.first, change.after.last) == (0, 4, 5, 9)
    assert change.before.value == np.median(losses[:5]) and change.after.value == np.median(losses[5:])
    assert "steps 0-4" in line and "steps 5-9" in line and "1.14 -> 1.14" not in line


def test_a_loss_that_rose_is_never_said_to_fall(tmp_path: Path) -> None:
    """Was "loss fell only -0.1%": the wording contradicted the sign."""
    n = 300
    t = np.arange(n)
    logs = {"grad_norm/total": np.full(n, 0.4), "grad_norm/fc.weight": np.full(n, 0.4),
            "update_ratio/fc.weight": np.full(n, 2.7e-8)}
    run = _record(tmp_path / "rose", 1.386 * (1 + 0.0015 * t / n), logs, {"update_ratio/fc.weight": 25})
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    low = next(f for f in diagnosis.findings if f.code == "lr_too_low")
    assert any(re.match(r"loss rose 0\.1\d% from", line) for line in low.evidence), low.evidence
    assert not any("fell only -" in line or "fell -" in line for line in _lines(diagnosis))


def test_fell_and_rose_in_one_finding_name_their_windows(tmp_path: Path) -> None:
    """Was "fell 30% since the start" and "rose +282%" in one finding: both now say which steps they compare."""
    n = 300
    t = np.arange(n, dtype=float)
    loss = np.where(t < 120, 1.4 - 1.12 * t / 120, 0.28 + 0.8 * (t - 120) / 180)
    logs = {"grad_norm/total": np.full(n, 0.5), "grad_norm/fc.weight": np.full(n, 0.5), "update_ratio/fc.weight": np.full(n, 0.03)}
    run = _record(tmp_path / "both", loss, logs, {"update_ratio/fc.weight": 10})
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    high = next(f for f in diagnosis.findings if f.code == "lr_too_high")
    changes = [(line, c) for line in high.evidence if isinstance(line, Evidence) for c in line.claims if isinstance(c, Change)]
    fell = next((line, c) for line, c in changes if c.says == "down")
    rose = next((line, c) for line, c in changes if c.says == "up")
    for line, change in (fell, rose):
        assert change.before.where in line and change.after.where in line
    assert fell[1].before.last < rose[1].before.first, "the fall is from the start, the rise from the best level after it"
    assert not any("since the start" in line for line in high.evidence)


def test_lower_and_raise_lr_never_both_advised(tmp_path: Path) -> None:
    """Was "lower LR from 5 to 1.5" and "raise LR" in one output: LR 100x too high, every ReLU dead, both losses flat and high."""
    n = 400
    t = np.arange(n)
    loss = np.where(t < 60, 1.39 - 0.3 * t / 60, 1.09)
    logs = {"lr/group0": np.full(n, 5.0), "act/dead_frac/relu": np.ones(n), "val/loss": np.full(n, 1.1),
            "grad_norm/total": np.full(n, 0.4)}
    run = _record(tmp_path / "conflict", loss, logs, {"act/dead_frac/relu": 25, "val/loss": 25}, config={"lr": 5.0})
    diagnosis = diagnose(open_run(run))
    check_diagnosis(run, diagnosis)
    by_code = {f.code: f for f in _all_findings(diagnosis)}
    assert {"dead_relu", "underfitting"} <= set(by_code), sorted(by_code)
    assert by_code["dead_relu"].fix.startswith("lower LR from 5 to about 1.5")
    under = by_code["underfitting"]
    assert "raise LR" not in under.fix
    assert f"not raising the LR: conflicts with Dead ReLU units ({confidence(by_code['dead_relu'].confidence)})" in under.fix
    moves = [m for f in _all_findings(diagnosis) for m in (*f.moves, *fix_moves_in_text(f.fix))]
    assert LR_DOWN in moves and LR_UP not in moves


@pytest.mark.parametrize("relative", [1e-9, 3e-6, 1.2e-5, 3e-4, 6.4e-4, 0.0123, 0.05, 0.25, 4.09])
@pytest.mark.parametrize("says", ["up", "down"])
def test_a_change_is_never_printed_as_zero(relative: float, says: str) -> None:
    """'rose 0.0%' reads as no change: a non-zero change prints a non-zero number, and the verb matches the sign."""
    from types import SimpleNamespace

    from tuidiag.diagnosis.evidence import change_words

    text = change_words(SimpleNamespace(relative=relative, says=says))
    verb, number = text.split()
    assert verb == ("rose" if says == "up" else "fell")
    shown = float(number.rstrip("%")) / 100
    assert shown > 0 and abs(shown - relative) <= 0.05 * relative + 0.005 * (relative >= 0.1)


@pytest.mark.parametrize("relative", [0.9, 0.99, 0.994, 0.995, 0.9962, 0.9998, 0.99999, 1 - 1e-9, 1.0])
def test_a_fall_short_of_zero_is_never_printed_as_100_percent(relative: float) -> None:
    """"fell 100%" says the value reached zero: a fall that did not is printed below 100%, close to it."""
    from types import SimpleNamespace

    from tuidiag.diagnosis.evidence import change_words

    number = float(change_words(SimpleNamespace(relative=relative, says="down")).split()[1].rstrip("%")) / 100
    assert (number == 1.0) == (relative == 1.0)
    assert abs(number - relative) <= 0.005
