"""A job run on a run tuidiag must leave as it is (marked ``"read_only"``, or unwritable) keeps its result in the
cache: the run's directory is unchanged, byte for byte, and the result is read back and shown all the same.

The regression: ``l``, ``n``, ``o``, ``s`` on ``tuidiag watch demo_runs/`` wrote ``demo_runs/*/jobs/`` into the
repository, so ``git status`` was dirty after trying the demo.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.app_helpers import DEMO_RUNS, drawn_text, wait_for
from tests.conftest import ROOT
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.store import open_run
from tuidiag.store.job_results import (JOBS_DIR, cached_results_dir, job_records, keeps_own_results, latest_result,
                                       list_results, save_result)
from tuidiag.viewmodel.jobs_view import job_texts

DEMOS = sorted(p.parent.name for p in DEMO_RUNS.glob("*/run.json"))
RESULT = {"passed": True, "reason": "target reached", "steps": 3, "initial_loss": 1.39, "final_loss": 0.0098, "reduction": 0.007,
          "losses": [1.39, 0.5, 0.0098], "optimizer": "adam", "lr": 0.001,
          "config": {"steps": 500, "lr": 0.001, "target": 0.01, "optimizer": "adam"}, "advice": None, "blocked": None,
          "device": "cpu", "frozen_parameters": []}
"""An overfit-one-batch result as the job saves it."""


def _tree(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root``: its mode and content digest (what ``git status`` would see change), and every directory."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        found[rel] = (path.stat().st_mode, hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else "dir")
    return found


def _git_status(path: Path) -> str:
    """What ``git status`` says about ``path``, untracked files included ("" where git or the repository is missing)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", str(path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _marked_copy(tmp_path: Path, demo: str) -> Path:
    run = tmp_path / "copy" / demo
    shutil.copytree(DEMO_RUNS / demo, run)
    return run


def _unmarked_unwritable_copy(tmp_path: Path, demo: str) -> Path:
    run = _marked_copy(tmp_path, demo)
    manifest = json.loads((run / "run.json").read_text())
    manifest.pop("read_only")
    (run / "run.json").write_text(json.dumps(manifest))
    run.chmod(0o555)
    return run


PLACES = {
    "repo demo path": lambda tmp_path, demo: DEMO_RUNS / demo,
    "copy marked read-only": _marked_copy,
    "unwritable copy": _unmarked_unwritable_copy,
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("demo", DEMOS)
def test_a_result_on_a_read_only_run_goes_to_the_cache(cache: Path, tmp_path: Path, place: str, demo: str) -> None:
    if place == "unwritable copy" and os.geteuid() == 0:
        pytest.skip("root writes into a directory of mode 0555")
    run = PLACES[place](tmp_path, demo)
    before, status = _tree(run), _git_status(run)
    try:
        assert not keeps_own_results(run)
        saved = save_result(run, "overfit_batch", RESULT, run=run.name, factory="test", step=5)
        assert _tree(run) == before and not (run / JOBS_DIR).exists()
        assert saved.parent == cached_results_dir(run) and cache in saved.parents
        assert list_results(run, "overfit_batch") == [saved]
        assert latest_result(run, "overfit_batch")["result"] == RESULT
        assert [r.record["result"] for r in job_records(open_run(run), ["overfit_batch"])] == [RESULT]
        assert [job for job, _ in job_texts(run)] == ["overfit_batch"]
        assert _git_status(run) == status
    finally:
        run.chmod(0o755)
        if place == "repo demo path" and (run / JOBS_DIR).is_dir():
            shutil.rmtree(run / JOBS_DIR)  # a failed run of this test must not leave the repository dirty


def test_a_run_of_ones_own_keeps_its_results_and_both_places_are_read_in_time_order(cache: Path, tmp_path: Path) -> None:
    run = _marked_copy(tmp_path, "healthy")
    first = save_result(run, "sharpness", {"verdict": "flat"}, step=1)
    time.sleep(0.002)  # the two names' times differ: they order the results
    manifest = json.loads((run / "run.json").read_text())
    manifest["read_only"] = False
    (run / "run.json").write_text(json.dumps(manifest))
    assert keeps_own_results(run)
    second = save_result(run, "sharpness", {"verdict": "sharp"}, step=2)
    assert second.parent == run / JOBS_DIR and first.parent == cached_results_dir(run)
    assert list_results(run, "sharpness") == [first, second]
    assert latest_result(run, "sharpness")["result"]["verdict"] == "sharp"


def test_every_shipped_demo_run_is_marked_read_only() -> None:
    """Regenerating ``demo_runs/`` must keep the mark (``tuidiag demo`` writes it)."""
    assert DEMOS and all(json.loads((DEMO_RUNS / d / "run.json").read_text())["read_only"] is True for d in DEMOS)


async def test_a_result_on_the_repo_demo_leaves_it_clean_and_the_monitor_shows_it(cache: Path) -> None:
    """The review's path, as the job command saves (``tests/test_demo_factory.py`` runs every real job on every
    demo, read-only, and checks no ``jobs/`` appears): the result goes to the cache, the Jobs tab shows it."""
    run = DEMO_RUNS / "healthy"
    before, status = _tree(run), _git_status(run)
    assert (run / "run.json").is_file() and not (run / JOBS_DIR).exists()
    try:
        saved = save_result(run, "overfit_batch", RESULT, run=run.name, factory="tuidiag.demo.factory:healthy",
                            device="cpu", step=1499)
        assert cache in saved.parents and _tree(run) == before and _git_status(run) == status
        app = TuidiagApp(run)
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
            await pilot.press("7")
            assert await wait_for(pilot, lambda: "PASS" in drawn_text(app.screen.query_one("#jobs-text", Static)))
            assert "after 3 steps" in drawn_text(app.screen.query_one("#jobs-text", Static))
        assert _tree(run) == before and _git_status(run) == status
    finally:
        if (run / JOBS_DIR).is_dir():
            shutil.rmtree(run / JOBS_DIR)
