"""A job result saved after a run was diagnosed is diagnosed again everywhere: the monitor's memo, its run view and
badge, and the status cache's signature all key on the run's job results as well as its rows.

The regression: on ``tuidiag watch demo_runs/`` the LR finder finished, yet the diagnosis panel kept the curves' fix
(``reduce LR from 0.3 to about 0.03``) even after ``r``, while ``tuidiag diagnose`` gave the finder's
(``set LR to about 0.00278 (LR finder)``): the diagnosis was memoised on the rows alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from tests.app_helpers import own_copy, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.cli import status_cache
from tuidiag.store import open_run
from tuidiag.store.job_results import mark_read_only, save_result
from tuidiag.viewmodel.model import RunsModel

CHECKED = {"resamples": 32, "low": 1.0, "high": 1.5, "missing": 0, "spread": 1.5, "limit": 3.0}


def _finder(suggested: float) -> dict[str, Any]:
    """An LR-finder result as the job saves it (its stability checked)."""
    return {"suggested_lr": suggested, "reliable": True, "warning": None, "stability": CHECKED, "optimizer_lr": 0.3}


RESULTS = {
    "lr_find": (_finder(0.00278), "LR finder: current LR 0.3 is 108x above the suggested 0.00278"),
    "nan_hunt": ({"verdict": "forward", "summary": "forward pass: module 4 produced NaN (op torch.exp)", "module": "4",
                  "op": "torch.exp", "step": 253}, "NaN hunt (step 253): forward pass: module 4 produced NaN (op torch.exp)"),
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _copy(tmp_path: Path, read_only: bool) -> Path:
    run = own_copy("lr-too-high", tmp_path / "runs" / "lr-too-high")
    if read_only:
        mark_read_only(run)  # its results go to the cache directory
    return run


def _diagnosed(model: RunsModel, run: Path):
    """Refresh ``model`` (what ``r`` and a finished job ask for) and wait for the diagnosis it queues; the run view's data."""
    model.refresh()
    slot = model._slots[run]
    if slot.diagnosing is not None:
        assert model._diagnosis_pool.wait([slot.diagnosing], 30)
    return model.detail(str(run))


def _shows(diagnosis, line: str) -> bool:
    """Whether one of the diagnosis's evidence lines starts with ``line``."""
    return any(e.startswith(line) for finding in diagnosis.findings for e in finding.evidence)


@pytest.mark.parametrize("read_only", [True, False], ids=["results in the cache", "results in RUN/jobs"])
@pytest.mark.parametrize("job", list(RESULTS))
def test_a_new_result_changes_the_models_diagnosis_and_the_status_signature(cache: Path, tmp_path: Path, job: str,
                                                                            read_only: bool) -> None:
    run = _copy(tmp_path, read_only)
    model = RunsModel(run.parent)
    try:
        model.discover()
        before = _diagnosed(model, run)
        assert before is not None and before.diagnosis.top.code == "lr_too_high"
        signature = status_cache.signature(run)[0]
        result, line = RESULTS[job]
        assert not _shows(before.diagnosis, line)
        save_result(run, job, result, step=open_run(run).last_step)
        assert status_cache.signature(run)[0] != signature  # `tuidiag status` diagnoses again
        after = _diagnosed(model, run)
        slot = model._slots[run]
        assert after is not None and _shows(after.diagnosis, line)
        assert model._diagnoses[run].jobs  # the memo covers the result: the next refresh diagnoses nothing
    finally:
        model.close()


async def test_the_open_run_view_shows_a_finished_jobs_evidence_after_r(cache: Path, tmp_path: Path) -> None:
    """The review's path: the run view is open on a finished run, the LR finder saves its result, ``r``."""
    run = _copy(tmp_path, read_only=True)
    app = TuidiagApp(run)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None
                              and app.screen.detail.diagnosis.findings)
        screen = app.screen
        assert screen.detail.diagnosis.top.fix.startswith("reduce LR from 0.3")
        save_result(run, "lr_find", _finder(0.00278), step=open_run(run).last_step)
        await pilot.press("r")
        line = RESULTS["lr_find"][1]
        assert await wait_for(pilot, lambda: _shows(screen.detail.diagnosis, line))
        assert "0.00278 (LR finder)" in screen.detail.diagnosis.top.fix
        assert "0.00278 (LR finder)" in str(screen.query_one("#diagnosis-text", Static).render())


def test_a_run_summarised_from_run_json_is_diagnosed_again_when_a_result_is_saved(cache: Path, tmp_path: Path) -> None:
    """The other read path: a run the recorder left with its summary in ``run.json`` (not read whole to be listed)."""
    import numpy as np

    from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter
    from tuidiag.store.manifest import new_manifest, write_manifest

    run = tmp_path / "runs" / "recorded"
    writer = ShardWriter(run, rank=0, flush_interval=3600)
    layout = Layout(["loss"])
    for step in range(50):
        writer.submit(MetricBatch(step, 1.7e9 + step, layout, np.array([1.0 / (1 + step)])))
    writer.close()
    manifest = new_manifest(run.name, {}, 1, 1.0)
    manifest.update(status="finished", last_step=writer.last_step, summary=writer.tail.to_json())
    write_manifest(run, manifest)
    model = RunsModel(run.parent)
    try:
        model.discover()
        _diagnosed(model, run)
        slot = model._slots[run]
        assert slot.tail is not None and slot.diagnosed is not None and slot.diagnosed[2] == ()
        saved = save_result(run, "nan_hunt", RESULTS["nan_hunt"][0], step=49)
        _diagnosed(model, run)
        assert slot.diagnosed is not None and slot.diagnosed[2] == (saved.name,)
        assert model._diagnoses[run].jobs == (saved.name,)  # the run view's whole diagnosis covers it
        assert status_cache.load(run)["signature"] == status_cache.signature(run)[0]  # and `tuidiag status` finds it
    finally:
        model.close()
