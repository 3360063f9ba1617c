"""``tuidiag compare``: before/after on real demo runs, text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    assert fixed["verdict"].startswith("B improves on A: best val loss -")
    assert "lr_too_high" in fixed["verdict"] and "resolved" in fixed["verdict"]
    assert fixed["a"]["name"] == "lr-too-high" and fixed["b"]["name"] == "healthy"


def test_text_table_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", HEALTHY, TOO_HIGH]) == 0
    out = capsys.readouterr().out
    assert "best val loss" in out and "A: healthy" in out and "B: lr-too-high" in out
    assert "Findings appeared: lr_too_high" in out
    assert "B is worse than A: best val loss +" in out


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
