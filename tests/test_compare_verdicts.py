"""The compare verdict over a matrix of pairs: both finished, one diverged (NaN/Inf at the end), both diverged,
and the best and final values disagreeing. A diverged run is never "better" for the best value it reached before
diverging, and a finding absent from B is "not present in B", never "resolved". Pure summaries, then the demo runs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tuidiag.diagnosis.codes import CODES, badge
from tuidiag.report.compare import METRICS, THRESHOLD_PCT, compare_summaries, compare_runs
from tuidiag.store import open_run

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"
NAN = float("nan")


def _summary(best: float, final: float, diverged: int | None = None, codes: tuple[str, ...] = ()) -> dict:
    """A :func:`summarize`-shaped run: best and final val loss; a diverged one ends with a NaN train loss."""
    values = {"best_val_loss": best, "final_val_loss": final, "final_train_loss": NAN if diverged is not None else final}
    findings = [{"code": c, "title": c, "severity": "warning"} for c in codes]
    return ({"name": "r", "path": "r", "status": "finished", "findings": findings, "diverged_step": diverged}
            | {key: values.get(key) for key, _, _ in METRICS})


BESTS = ((0.3, 1.4), (1.4, 0.3), (1.0, 1.02))
"""Best val loss (A, B): A lower, B lower, within the threshold."""


@pytest.mark.parametrize(("best", "da", "db"), [(b, da, db) for b in BESTS for da, db in ((120, None), (None, 80))])
def test_one_diverged_run_is_worse_at_the_end_whatever_its_best(best: tuple[float, float], da: int | None,
                                                                db: int | None) -> None:
    result = compare_summaries(_summary(best[0], 1.5e7 if da else 1.3, da), _summary(best[1], 1.5e7 if db else 1.3, db))
    text = result.verdict
    name, step = ("A", da) if da else ("B", db)
    assert text.startswith(f"{name} diverged (NaN/Inf from step {step}); {'B' if name == 'A' else 'A'} did not")
    assert f"B is {'better' if name == 'A' else 'worse'} at the end" in text
    assert "improves on" not in text and "is worse than" not in text
    diverged_best, other_best = (best[0], best[1]) if name == "A" else (best[1], best[0])
    if abs(best[1] - best[0]) / best[0] * 100 < THRESHOLD_PCT:
        assert "about the same best val loss" in text
    elif diverged_best < other_best:
        assert f"though {name} had the lower best val loss" in text and text.endswith("before diverging")
    else:
        assert f"and {'B' if name == 'A' else 'A'} had the lower best val loss" in text and "before diverging" not in text


@pytest.mark.parametrize(("best", "da", "db"), [(b, da, db) for b in BESTS for da, db in
                                                  ((None, None), (120, None), (None, 80), (100, 300))])
def test_the_table_never_calls_a_diverged_run_better_without_saying_so(best: tuple[float, float],
                                                                     da: int | None, db: int | None) -> None:
    """Each row of the table (text and JSON) that favours a run which diverged says so (its values were taken
    before the NaN/Inf); the final train loss row (the NaN/Inf itself), and a row that favours a run that did not
    diverge, is the bare outcome."""
    from rich.console import Console

    from tuidiag.text.comparison import render_table

    result = compare_summaries(_summary(best[0], NAN if da else 1.3, da), _summary(best[1], NAN if db else 1.3, db))
    console = Console(width=200, record=True)
    console.print(render_table(result))
    rows = {line.split("│")[1].strip(): line.split("│")[-2].strip() for line in console.export_text().splitlines()
            if line.count("│") >= 6}
    for metric, entry in zip(result.metrics, result.to_json()["metrics"]):
        said = result.outcome_text(metric)
        assert entry["outcome_text"] == said and rows[metric.label] == said
        favoured = {"better": db, "worse": da}.get(metric.outcome)
        if metric.key != "final_train_loss" and favoured is not None:
            link = "before" if metric.key.startswith("best_") else "but"
            assert said.startswith(f"{metric.outcome}, {link} ") and said.endswith("diverged"), said
        else:
            assert said == metric.outcome


@pytest.mark.parametrize("best", BESTS)
def test_both_diverged_says_so_and_compares_before(best: tuple[float, float]) -> None:
    result = compare_summaries(_summary(best[0], NAN, 100), _summary(best[1], NAN, 300))
    assert result.verdict.startswith("Both runs diverged (A: NaN/Inf from step 100, B: from step 300); before diverging, ")
    tail = result.verdict.split("before diverging, ", 1)[1]
    assert tail.startswith("no clear difference" if best == (1.0, 1.02) else
                           "B improves on A" if best[1] < best[0] else "B is worse than A")


@pytest.mark.parametrize(("best", "final"), list(itertools.product(BESTS, BESTS)))
def test_best_and_final_disagreeing_are_both_said(best: tuple[float, float], final: tuple[float, float]) -> None:
    """Neither diverged: the verdict leads with the best value and adds the end when the end goes the other way."""
    result = compare_summaries(_summary(best[0], final[0]), _summary(best[1], final[1]))
    metrics = {m.key: m for m in result.metrics}

    def direction(key: str) -> str:
        m = metrics[key]
        return "same" if abs(m.improvement_pct) < THRESHOLD_PCT else m.outcome

    head, end = direction("best_val_loss"), direction("final_val_loss")
    words = {"better": "B improves on A", "worse": "B is worse than A", "same": "No clear difference"}
    assert result.verdict.startswith(words[head] + ": best val loss ")
    if end != "same" and end != head:
        assert f"at the end B is {end}: final val loss {metrics['final_val_loss'].change_text}" in result.verdict
    else:
        assert "at the end" not in result.verdict
    assert "diverged" not in result.verdict


def test_findings_absent_from_b_are_not_called_resolved() -> None:
    result = compare_summaries(_summary(0.3, NAN, 50, ("lr_too_high", "nonfinite_loss")),
                               _summary(1.4, 1.4, None, ("lr_too_low",)))
    assert "not present in B: LR too high, NaN loss" in result.verdict and "new in B: LR too low" in result.verdict
    assert "resolved" not in result.verdict


def test_the_reviewed_demo_pair() -> None:
    """lr-too-high (NaN, final val loss 1.56e7) against lr-too-low: B is better at the end, A had the lower best."""
    result = compare_runs(open_run(DEMO / "lr-too-high"), open_run(DEMO / "lr-too-low"))
    step = result.a["diverged_step"]
    assert isinstance(step, int) and result.b["diverged_step"] is None
    assert result.verdict.startswith(f"A diverged (NaN/Inf from step {step}); B did not: B is better at the end, "
                                     "though A had the lower best val loss (A 0.3249, B 1.389) before diverging")
    assert "resolved" not in result.verdict and "not present in B: LR too high" in result.verdict


@pytest.mark.parametrize("code", sorted(c for c in CODES if c not in ("healthy", "unreadable")))
def test_findings_are_named_as_the_monitor_names_them(code: str) -> None:
    """Every code, gone from B or new in it, reads as its badge (as the overview and ``tuidiag status`` show it)."""
    gone = compare_summaries(_summary(0.3, 0.3, None, (code,)), _summary(0.3, 0.3))
    new = compare_summaries(_summary(0.3, 0.3), _summary(0.3, 0.3, None, (code,)))
    assert gone.verdict.endswith(f"; not present in B: {badge(code)}")
    assert new.verdict.endswith(f"; new in B: {badge(code)}")


SHAPES = {"healthy": None, "nan_at_150": (150, float("nan")), "nan_from_0": (0, float("nan")),
          "blowup_at_150": (150, 1e20), "inf_at_199": (199, float("inf"))}
"""Training losses: (first bad step, the value from there on), or None for a healthy run."""
VALS = {"none": (), "before": tuple(range(0, 141, 20)), "throughout": tuple(range(0, 200, 20))}
"""Steps at which the validation loss is logged (finite, falling)."""


def _recorded(path: Path, shape: str, val: str) -> Path:
    import tuidiag

    bad = SHAPES[shape]
    with tuidiag.Recorder(path, flush_interval=0.1) as rec:
        for i in range(200):
            rec.step(bad[1] if bad is not None and i >= bad[0] else 2.0 / (1 + i / 20))
            if i in VALS[val]:
                rec.log({"val/loss": 0.4 + 1.0 / (1 + i)})
    return path


@pytest.mark.parametrize("val", list(VALS))
@pytest.mark.parametrize(("shape_a", "shape_b"), [("healthy", s) for s in SHAPES] + [("nan_at_150", "blowup_at_150"),
                                                                                     ("nan_from_0", "healthy")])
def test_recorded_pairs_name_every_divergence_and_claim_nothing_before_it_that_was_after(
        tmp_path: Path, val: str, shape_a: str, shape_b: str) -> None:
    """Recorded pairs: a loss that ends NaN/Inf or 1e20 (100x above its best) diverged, from the step it went bad; a
    diverged run's best values come from the steps before it (none logged before: no best, and no comparison
    "before" it); every row that favours a diverged run says so."""
    import numpy as np

    result = compare_runs(open_run(_recorded(tmp_path / "a", shape_a, val)), open_run(_recorded(tmp_path / "b", shape_b, val)))
    for side, shape in (("a", shape_a), ("b", shape_b)):
        summary, bad = getattr(result, side), SHAPES[shape]
        assert summary["diverged_step"] == (bad[0] if bad is not None else None)
        assert summary["diverged_how"] == (None if bad is None else "nonfinite" if not np.isfinite(bad[1]) else "blowup")
        logged = [0.4 + 1.0 / (1 + i) for i in VALS[val] if bad is None or i < bad[0]]
        assert summary["best_val_loss"] == (pytest.approx(min(logged)) if logged else None)
    diverged = [name for name, shape in (("A", shape_a), ("B", shape_b)) if SHAPES[shape] is not None]
    if len(diverged) == 1:
        bad = SHAPES[shape_a if diverged == ["A"] else shape_b]
        how = "NaN/Inf" if not np.isfinite(bad[1]) else "loss over 100x its best"
        assert result.verdict.startswith(f"{diverged[0]} diverged ({how} from step {bad[0]})"), result.verdict
    elif len(diverged) == 2:
        assert result.verdict.startswith("Both runs diverged"), result.verdict
    else:
        assert "diverged" not in result.verdict
    for metric in result.metrics:
        favoured = {"better": "B", "worse": "A"}.get(metric.outcome)
        said = result.outcome_text(metric)
        if favoured in diverged and metric.key != "final_train_loss":
            assert said.endswith("diverged") and (", before " in said) == metric.key.startswith("best_"), said
        else:
            assert said == metric.outcome


@pytest.mark.parametrize("lucky_at", [0, 1, 57, 119])
def test_best_train_loss_is_a_whole_window_so_one_lucky_batch_never_is_it(tmp_path: Path, lucky_at: int) -> None:
    """The caption says "lowest 10-step moving average": one low loss, at the first step or anywhere, is never the best
    train loss on its own; the best is the lowest mean of 10 consecutive steps."""
    import numpy as np

    import tuidiag
    from tuidiag.report.compare import summarize

    losses = np.full(120, 1.0)
    losses[lucky_at] = 0.01
    with tuidiag.Recorder(tmp_path / "r", flush_interval=0.1) as rec:
        for value in losses:
            rec.step(float(value))
    run = open_run(tmp_path / "r")
    from tuidiag.diagnosis import diagnose

    best = summarize(run, diagnose(run))["best_train_loss"]
    assert best == pytest.approx((9 * 1.0 + 0.01) / 10)
