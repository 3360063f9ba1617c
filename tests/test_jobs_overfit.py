"""Overfit-one-batch (the seeds' checklist item 3) and the sharpness check, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import jobs_factory
import pytest
import torch

from tuidiag.cli.main import main
from tuidiag.jobs.factory import as_parts
from tuidiag.jobs.overfit import OverfitConfig, overfit_batch
from tuidiag.store.job_results import list_results
from tuidiag.jobs.sharpness import SharpnessConfig, sharpness

CPU = torch.device("cpu")


def _run(tmp_path: Path, factory: str) -> Path:
    run = tmp_path / "run"
    jobs_factory.record(run, f"jobs_factory:{factory}", steps=2)
    return run


def test_healthy_model_memorises_one_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "plain_mlp")
    capsys.readouterr()
    assert main(["overfit-batch", str(run), "--yes", "--json", "--device", "cpu", "--lr", "0.01"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] is True and result["reason"] == "target reached"
    assert result["final_loss"] <= 0.01 < result["initial_loss"]
    assert 0 < result["steps"] < 500 and len(result["losses"]) == result["steps"] + 1
    assert result["optimizer"] == "adam" and result["lr"] == pytest.approx(1e-2)
    assert len(list_results(run, "overfit_batch")) == 1


def test_model_that_ignores_its_input_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "broken")
    capsys.readouterr()
    assert main(["overfit-batch", str(run), "--yes", "--json", "--steps", "60", "--lr", "0.01"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] is False and result["reason"] == "steps exhausted" and result["steps"] == 60
    assert result["final_loss"] > 0.5 and "detached" in result["advice"]


def test_text_output_has_verdict_and_curve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "plain_mlp")
    assert main(["overfit-batch", str(run), "--yes", "--lr", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "Overfit one batch: PASS (target reached)" in out and "step" in out


def test_run_optimizer_option_uses_the_factory_optimizer() -> None:
    parts = as_parts(jobs_factory.plain_mlp())
    result = overfit_batch(parts, CPU, OverfitConfig(steps=60, lr=None, optimizer="run"))
    assert result["lr"] == pytest.approx(1e-2) and result["optimizer"] == "run"
    assert result["losses"][-1] < result["losses"][0]
    assert parts.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2)


def test_sharpness_flat_vs_sharp_and_reproducible() -> None:
    parts = as_parts(jobs_factory.plain_mlp())
    overfit_batch(parts, CPU, OverfitConfig(steps=5))  # restored: the model is back at its initial weights
    small = sharpness(parts, CPU, SharpnessConfig(epsilon=0.01, samples=4))
    large = sharpness(parts, CPU, SharpnessConfig(epsilon=1.0, samples=4))
    again = sharpness(parts, CPU, SharpnessConfig(epsilon=1.0, samples=4))
    assert small["verdict"] == "flat" and abs(small["ratio"]) < 0.1
    assert large["ratio"] > small["ratio"] and large["verdict"] == "sharp"
    assert again["ratio"] == large["ratio"]  # private generator: same perturbations


def test_sharpness_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "healthy")
    capsys.readouterr()
    assert main(["sharpness", str(run), "--yes", "--samples", "3"]) == 0
    assert "Sharpness: " in capsys.readouterr().out
    assert main(["sharpness", str(run), "--yes", "--epsilon", "-1"]) == 2
    assert len(list_results(run, "sharpness")) == 1
