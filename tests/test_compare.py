"""``tuidiag compare``: before/after on real demo runs, text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.cli.main import main
from tuidiag.report.compare import Metric

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"
TOO_HIGH, HEALTHY = str(DEMO / "lr-too-high"), str(DEMO / "healthy")


@pytest.fixture(scope="module")
def fixed() -> dict:
    """lr-too-high (before) against healthy (after), as JSON."""
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["compare", TOO_HIGH, HEALTHY, "--json"]) == 0
    return json.loads(buffer.getvalue())


def test_json_shows_the_fix_improved_things(fixed: dict) -> None:
    metrics = {m["key"]: m for m in fixed["metrics"]}
    best_val = metrics["best_val_loss"]
    assert best_val["b"] < best_val["a"] and best_val["change_pct"] < 0 < best_val["improvement_pct"]
    assert best_val["outcome"] == "better"
    assert metrics["best_val_acc"]["outcome"] == "better" and metrics["best_val_acc"]["improvement_pct"] > 0
    assert metrics["final_train_loss"]["a"] == "nan" and metrics["final_train_loss"]["outcome"] == "better"
    assert metrics["steps"]["outcome"] == "n/a"
    codes = {f["code"] for f in fixed["findings"]["disappeared"]}
    assert "lr_too_high" in codes
    assert "lr_too_high" not in {f["code"] for f in fixed["findings"]["persisted"] + fixed["findings"]["appeared"]}
    assert fixed["verdict"].startswith("A diverged (NaN/Inf from step ") and "B is better at the end" in fixed["verdict"]
    assert "not present in B: LR too high" in fixed["verdict"] and "resolved" not in fixed["verdict"]
    assert fixed["a"]["name"] == "lr-too-high" and fixed["b"]["name"] == "healthy"


def test_text_table_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", HEALTHY, TOO_HIGH]) == 0
    out = capsys.readouterr().out
    assert "best val loss" in out and "A: healthy" in out and "B: lr-too-high" in out
    assert "Findings appeared: lr_too_high" in out
    assert "B diverged (NaN/Inf from step " in out and "B is worse at the end" in out


def test_improvement_is_sign_aware() -> None:
    assert Metric("loss", "loss", 1.0, 0.8, "lower").improvement_pct == pytest.approx(20.0)
    assert Metric("acc", "acc", 0.8, 0.9, "higher").improvement_pct == pytest.approx(12.5)
    assert Metric("acc", "acc", 0.9, 0.8, "higher").outcome == "worse"
    assert Metric("loss", "loss", float("nan"), 0.5, "lower").outcome == "better"
    assert Metric("norm", "norm", 1.0, 2.0, None).outcome == "n/a"


@pytest.mark.parametrize("order", ["first", "second"])
def test_missing_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], order: str) -> None:
    missing = str(tmp_path / "nope")
    args = [missing, HEALTHY] if order == "first" else [HEALTHY, missing]
    assert main(["compare", *args]) == 2
    assert "does not exist" in capsys.readouterr().err


def _summary(name: str, values: dict[str, float | None]) -> dict:
    """A :func:`summarize`-shaped dict with only the given headline values set."""
    from tuidiag.report.compare import METRICS

    base = {"name": name, "path": name, "status": "finished", "findings": []}
    return base | {key: values.get(key) for key, _, _ in METRICS}


_value = st.one_of(st.floats(-1e6, 1e6, allow_nan=False).filter(lambda v: v == 0 or abs(v) > 1e-6),
                   st.sampled_from([float("nan"), float("inf")]))


@settings(max_examples=examples(150), deadline=None)
@given(a=_value, b=_value, key=st.sampled_from(["best_val_loss", "best_val_acc"]))
def test_verdict_and_table_agree_in_sign_and_words(a: float, b: float, key: str) -> None:
    """For any pair, lower- or higher-is-better: the verdict quotes the table's change (B vs A, signed as the
    value moved) and says better/worse exactly when the table's row does."""
    import io

    from rich.console import Console

    from tuidiag.report.compare import compare_summaries
    from tuidiag.text.comparison import render_table

    result = compare_summaries(_summary("a", {key: a}), _summary("b", {key: b}))
    metric = next(m for m in result.metrics if m.key == key)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(render_table(result))
    row = next(line for line in out.getvalue().splitlines() if f" {metric.label} " in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[3] == metric.change_text and cells[4] == metric.outcome
    if metric.change_pct is not None and metric.change_pct != 0:
        assert metric.change_text.startswith("+" if b > a else "-")
        assert metric.change_text in result.verdict
    if result.verdict.startswith("B improves on A"):
        assert metric.outcome == "better"
    elif result.verdict.startswith("B is worse than A"):
        assert metric.outcome == "worse"
    elif metric.outcome in ("better", "worse") and metric.change_pct is not None:
        assert abs(metric.change_pct) < 10 and "No clear difference" in result.verdict


@pytest.mark.parametrize(("a", "b", "words"), [(0.3249, 1.389, "B is worse than A: best val loss +327.5%"),
                                               (1.389, 0.3249, "B improves on A: best val loss -76.6%")])
def test_reviewed_example_verdict_sign(a: float, b: float, words: str) -> None:
    """The review's case (lr-too-low against lr-too-high): the verdict and the table both say +327.5% worse."""
    from tuidiag.report.compare import compare_summaries

    result = compare_summaries(_summary("a", {"best_val_loss": a}), _summary("b", {"best_val_loss": b}))
    assert result.verdict.startswith(words)
    assert next(m for m in result.metrics if m.key == "best_val_loss").change_text == words.rsplit(" ", 1)[1]
