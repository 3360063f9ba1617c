"""Time travel does not see the future: a job result counts only at and after the step at which it ran,
in ``tuidiag diagnose --at`` and in the monitor's replay (diagnosis and Jobs tab), for every job kind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tuidiag.cli.main import main
from tuidiag.diagnosis import diagnose
from tuidiag.viewmodel.model import RunsModel
from tuidiag.store import open_run
from tuidiag.job_kinds import names as job_names
from tuidiag.store.job_results import JOBS_DIR, job_records, latest_result, save_result, step_from_run

JOB_NAMES = job_names()

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"
RAN_AT = 593
STABLE = {"resamples": 32, "low": 1e-6, "high": 2e-6, "missing": 0, "spread": 2.0, "limit": 3.0}
RESULTS: dict[str, dict[str, Any]] = {
    # far below the demo's LR (1e-3 to 1e-4): on its own, a (weak) "LR too high" finding with the finder's evidence
    "lr_find": {"suggested_lr": 1e-6, "reliable": True, "warning": None, "stability": STABLE, "optimizer_lr": 1e-3,
                "suggestions": {"steepest": 1e-6, "valley": 1e-6, "min_div10": 1e-6}, "lrs": [1e-6, 1e-4], "losses": [1.0, 0.5],
                "steps_run": 2, "stopped": "diverged", "comparison": "the optimizer's LR 0.001 is 1000x above the suggested 1e-06"},
    "nan_hunt": {"verdict": "no_nonfinite", "summary": "armed for 5 steps (589-593): no non-finite loss or gradient appeared"},
    "overfit_batch": {"verdict": "PASS", "summary": "memorised one batch: loss 1.2 -> 0.001 in 50 steps", "losses": [1.2, 0.001]},
    "sharpness": {"summary": "sharpness 3.2 (top Hessian eigenvalue)", "sharpness": 3.2, "losses": [1.0, 1.1]},
}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The healthy demo run (steps 0-1499) with one result of every job kind, made at step 593."""
    path = tmp_path / "healthy"
    shutil.copytree(DEMO / "healthy", path)
    for job in JOB_NAMES:
        save_result(path, job, RESULTS[job], run="healthy", step=RAN_AT, source="live")
    return path


def _diagnose_cli(run: Path, at: int, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["diagnose", str(run), "--at", str(at), *extra]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("at", [0, 400, RAN_AT - 1])
def test_diagnose_before_the_job_shows_no_trace_of_it(run: Path, at: int, capsys: pytest.CaptureFixture[str]) -> None:
    text, as_json = _diagnose_cli(run, at, capsys), _diagnose_cli(run, at, capsys, "--json")
    for out in (text, as_json):
        assert "LR finder" not in out and "1e-06" not in out and "1.00e-06" not in out
    assert json.loads(as_json)["step"] == at


@pytest.mark.parametrize("at", [RAN_AT, 600, None])
def test_diagnose_at_or_after_the_job_uses_it(run: Path, at: int | None, capsys: pytest.CaptureFixture[str]) -> None:
    out = _diagnose_cli(run, at, capsys) if at is not None else (main(["diagnose", str(run)]), capsys.readouterr().out)[1]
    assert "LR finder: current LR" in out


@pytest.mark.parametrize("job", JOB_NAMES)
def test_every_job_kind_counts_only_from_its_step(run: Path, job: str) -> None:
    assert latest_result(run, job, at=RAN_AT - 1) is None
    for at in (RAN_AT, 1000, None):
        assert latest_result(run, job, at=at)["result"] == RESULTS[job]


def test_an_older_result_counts_while_a_newer_one_is_in_the_future(run: Path) -> None:
    save_result(run, "lr_find", {**RESULTS["lr_find"], "suggested_lr": 2e-3}, step=100)
    save_result(run, "lr_find", {**RESULTS["lr_find"], "suggested_lr": 3e-3}, step=1200)  # saved last, ran last
    assert latest_result(run, "lr_find", at=99) is None
    assert latest_result(run, "lr_find", at=400)["result"]["suggested_lr"] == 2e-3
    assert latest_result(run, "lr_find", at=700)["result"]["suggested_lr"] == 1e-6
    assert latest_result(run, "lr_find", at=None)["result"]["suggested_lr"] == 3e-3


def test_replay_diagnosis_and_jobs_tab_follow_the_cursor(run: Path) -> None:
    model = RunsModel(run.parent)
    model.discover()
    model.refresh()  # discovery notes the runs; a refresh reads them
    before, after = model.detail(str(run), at=400), model.detail(str(run), at=600)
    assert before.jobs == () and not any("LR finder" in line for f in before.diagnosis.findings for line in f.evidence)
    assert [job for job, _ in after.jobs] == list(JOB_NAMES)
    assert any("LR finder" in line for f in after.diagnosis.findings for line in f.evidence)


def _legacy(run: Path, job: str, created: float) -> Path:
    """A result file as older versions wrote it: no ``step``, only the wall-clock ``created``."""
    path = run / JOBS_DIR / f"{job}-19700101-000000.000Z.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"job": job, "version": 1, "created": created, "run": "healthy", "result": RESULTS[job]}))
    return path


@pytest.mark.parametrize("job", JOB_NAMES)
def test_results_without_a_step_are_dated_by_the_runs_clock(tmp_path: Path, job: str) -> None:
    path = tmp_path / "healthy"
    shutil.copytree(DEMO / "healthy", path)
    loss = open_run(path).series("train/loss")
    created = float(loss.wall_times[list(loss.steps).index(RAN_AT)]) + 1e-3
    _legacy(path, job, created)
    dated = step_from_run(open_run(path))
    assert latest_result(path, job, at=RAN_AT - 1, step_of=dated) is None
    assert latest_result(path, job, at=RAN_AT, step_of=dated)["result"] == RESULTS[job]
    assert latest_result(path, job, at=RAN_AT) is None  # no way to date it: never shown in the past
    if job == "lr_find":
        loaded = open_run(path)
        jobs = job_records(loaded)
        assert not any("LR finder" in line for f in diagnose(loaded, at=400, jobs=jobs).findings for line in f.evidence)
        assert any("LR finder" in line for f in diagnose(loaded, at=600, jobs=jobs).findings for line in f.evidence)


def test_a_live_job_is_saved_with_the_step_it_ran_at(tmp_path: Path) -> None:
    from test_live_jobs import _train

    *_, request_id = _train(tmp_path / "r", 9, ("sharpness", {"samples": 2, "batches": 2}), at=6)
    [path] = (tmp_path / "r" / JOBS_DIR).glob("sharpness-*.json")
    assert json.loads(path.read_text())["step"] == 6
    assert latest_result(tmp_path / "r", "sharpness", at=5) is None and latest_result(tmp_path / "r", "sharpness", at=6)
