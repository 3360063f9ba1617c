"""The NaN hunt on real recorded runs: each planted NaN source is located exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jobs_factory
import pytest
import torch

from tuidiag.cli.main import main
from tuidiag.jobs import JobError
from tuidiag.jobs.factory import as_parts
from tuidiag.jobs.nan_hunt import find_capture, load_capture, nan_hunt
from tuidiag.store.job_results import list_results


def _record(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    steps = jobs_factory.record(run, f"jobs_factory:{name}")
    assert steps == jobs_factory.POISON_STEP + 1, "the planted source must fire at the poisoned step"
    assert find_capture(run) is not None and find_capture(run).name == f"nan-r0-step{jobs_factory.POISON_STEP}.pt"
    return run


def _hunt(run: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["nan-hunt", str(run), "--yes", "--json", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["step"] == jobs_factory.POISON_STEP and result["state_is_pre_step"] is True
    assert len(list_results(run, "nan_hunt")) == 1
    return result


def test_log_of_zero_in_the_loss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_log0"), capsys)
    assert (result["verdict"], result["pass"], result["module"], result["op"]) == ("forward", "forward", "loss_fn", "log")
    assert "log_mse" in result["module_type"]
    assert "torch.log(out)" in result["op_stack"][-1] and "jobs_factory.py" in result["op_stack"][-1]
    assert result["inputs"]["output"]["min"] == 0.0 and result["inputs"]["output"]["nan"] == 0
    assert result["output"]["loss"]["posinf"] == 1


def test_division_by_zero_in_a_custom_layer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_div0"), capsys)
    assert (result["verdict"], result["pass"], result["module"], result["module_type"]) == ("forward", "forward", "norm", "RowNormalize")
    assert result["op"] == "div" and "x / x.sum(dim=1" in result["op_stack"][-1]
    assert result["inputs"]["input"]["nan"] == 0 and result["inputs"]["input"]["min"] == 0.0
    assert result["output"]["output"]["nan"] == 6  # one empty row of 6 counts: 0/0
    assert result["parameters"] == {}


def test_overflow_from_huge_logits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_overflow"), capsys)
    assert (result["verdict"], result["module"], result["module_type"], result["op"]) == ("forward", "softmax", "NaiveSoftmax", "exp")
    assert "torch.exp(x)" in result["op_stack"][-1]
    assert result["inputs"]["input"]["abs_max"] > 88.7  # exp overflows float32 above ~88.7
    assert result["inputs"]["input"]["posinf"] == 0
    assert result["first_nan_op"]["op"] == "div"  # inf / inf


def test_nan_in_one_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_batch"), capsys)
    assert result["verdict"] == "batch"
    assert result["tensors"]["x"]["nan"] == 1 and "y" not in result["tensors"]
    assert result["parameters"] == []  # BatchNorm's running stats went NaN in that forward: a note, not the cause
    assert any("running statistics" in note for note in result["notes"])


def test_inf_only_in_the_backward_of_a_custom_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_backward_inf"), capsys)
    assert (result["verdict"], result["pass"], result["module"], result["op"]) == ("backward", "backward", "act", "SafeLogBackward")
    assert result["module_type"] == "SafeLogAct"
    grad_in, grad_out = result["grad_input"]["grad_input"], result["grad_output"]["grad_output"]
    assert grad_out["nan"] == grad_out["posinf"] == grad_out["neginf"] == 0
    assert grad_in["posinf"] + grad_in["neginf"] > 0
    assert "SafeLog.apply(x)" in result["op_stack"][-1]  # the forward line, from anomaly mode


def test_text_report_names_the_culprit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _record(tmp_path, "nan_div0")
    capsys.readouterr()
    assert main(["nan-hunt", str(run), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "module: norm (RowNormalize), pass: forward" in out and "op: div" in out and "x / x.sum" in out


def test_parameters_already_non_finite(tmp_path: Path) -> None:
    run = _record(tmp_path, "nan_div0")
    capture = load_capture(find_capture(run))
    capture["model_state"]["head.weight"][0, 0] = float("inf")
    result = nan_hunt(as_parts(jobs_factory.nan_div0()), capture, torch.device("cpu"))
    assert result["verdict"] == "parameters" and result["parameters"] == ["head.weight"]


def test_no_capture_says_how_to_get_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    jobs_factory.record(run, "jobs_factory:healthy", steps=2)
    calls = jobs_factory.BUILD_CALLS["count"]
    assert main(["nan-hunt", str(run), "--yes", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "no_capture" and "rec.batch(x, y)" in result["how_to_capture"]
    assert jobs_factory.BUILD_CALLS["count"] == calls  # nothing to replay: the factory is not run


def test_capture_with_code_objects_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "nan-r0-step1.pt"
    torch.save({"model_state": {}, "optimizer_state": {}, "batch": None, "step": 1, "evil": jobs_factory.RowNormalize()}, bad)
    with pytest.raises(JobError, match="cannot load capture"):
        load_capture(bad)
