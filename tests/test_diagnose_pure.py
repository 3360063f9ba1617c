"""``diagnose()`` is a pure function: it reads no file and changes none of its arguments.

For every demo run, with a result of each job the diagnosis weighs saved in it, at the
end and half-way: the run is loaded and its job results read, the run directory is
deleted, and ``diagnose`` runs under an audit hook that records every file the process
opens or lists. Its answer must equal the one given while the directory existed, nothing
may be opened, and the run and the job results must be as they were. The combiner, the
fix-conflict resolution and the job evidence return new findings and leave theirs alone.
"""

from __future__ import annotations

import copy
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.app_helpers import own_copy
from tuidiag.diagnosis import diagnose
from tuidiag.diagnosis.combine import combine, resolve_fix_conflicts
from tuidiag.diagnosis.engine import run_rules
from tuidiag.diagnosis.job_evidence import lr_evidence, nan_evidence
from tuidiag.diagnosis.view import RunView
from tuidiag.store import Run, open_run
from tuidiag.store.job_results import job_records, save_result

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"
STABLE = {"resamples": 32, "low": 1e-3, "high": 2e-3, "missing": 0, "spread": 2.0, "limit": 3.0}
RESULTS = {
    "lr_find": {"suggested_lr": 1e-3, "reliable": True, "warning": None, "stability": STABLE, "optimizer_lr": 0.3},
    "nan_hunt": {"verdict": "forward", "summary": "log in head made the first NaN", "op": "log", "module": "head", "step": 9},
    "overfit_batch": {"passed": True, "verdict": "PASS", "summary": "memorised one batch"},
}
FILE_EVENTS = ("open", "os.listdir", "os.scandir", "glob.glob", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "shutil.rmtree",
               "os.chmod", "os.truncate")
_watching: set[int] = set()
_seen: list[tuple[str, Any]] = []


def _audit(event: str, args: Any) -> None:
    if threading.get_ident() in _watching and event in FILE_EVENTS:
        _seen.append((event, args))


sys.addaudithook(_audit)  # cannot be removed: it records only while a test's thread is watched


def _snapshot(run: Run) -> dict[str, Any]:
    """Everything a diagnosis could change in ``run``, copied."""
    return {"manifest": copy.deepcopy(run.manifest), "events": copy.deepcopy(run.events), "warnings": list(run.warnings),
            "series": {(rank, name): (s.steps.copy(), s.values.copy()) for rank in run.ranks for name in run.metric_names
                       if len(s := run.series(name, rank))}}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    series_same = a["series"].keys() == b["series"].keys() and all(
        np.array_equal(a["series"][k][0], b["series"][k][0]) and np.array_equal(a["series"][k][1], b["series"][k][1], equal_nan=True)
        for k in a["series"])
    return series_same and all(a[k] == b[k] for k in ("manifest", "events", "warnings"))


@pytest.fixture(scope="module")
def demo_copies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo runs, each with a result of the LR finder, the NaN hunt and the overfit test saved at step 20."""
    root = tmp_path_factory.mktemp("pure")
    for run in sorted(p for p in DEMO.iterdir() if (p / "run.json").is_file()):
        own_copy(run.name, root / run.name)  # a run of one's own: its results in RUN/jobs travel with its copies
        for job, result in RESULTS.items():
            save_result(root / run.name, job, result, step=20)
    return root


@pytest.mark.parametrize("half", [False, True], ids=["end", "half-way"])
@pytest.mark.parametrize("name", sorted(p.name for p in DEMO.iterdir() if (p / "run.json").is_file()))
def test_diagnose_reads_no_file_and_changes_none_of_its_arguments(demo_copies: Path, tmp_path: Path, name: str, half: bool) -> None:
    path = Path(shutil.copytree(demo_copies / name, tmp_path / name))
    run = open_run(path)
    jobs = job_records(run)
    assert {r.job for r in jobs} == set(RESULTS)
    at = run.last_step // 2 if half and run.last_step else None
    expected = diagnose(run, at, jobs).to_json()
    before, jobs_before = _snapshot(run), copy.deepcopy(jobs)
    shutil.rmtree(path)
    _seen.clear()
    _watching.add(threading.get_ident())
    try:
        result = diagnose(run, at, jobs)
    finally:
        _watching.discard(threading.get_ident())
    assert _seen == [], f"diagnose touched files: {_seen[:5]}"
    assert result.to_json() == expected
    assert _same(_snapshot(run), before) and jobs == jobs_before


@pytest.mark.parametrize("name", ["lr-too-high", "vanishing-gradients"])
def test_the_combiner_and_the_job_evidence_return_new_findings(demo_copies: Path, name: str) -> None:
    run = open_run(demo_copies / name)
    found = run_rules(RunView(run), [])
    assert found
    given = copy.deepcopy(found)
    steps = [lambda f: lr_evidence(f, RESULTS["lr_find"], 0.3), lambda f: nan_evidence(f, RESULTS["nan_hunt"]), combine,
             resolve_fix_conflicts]
    for step in steps:
        out = step(found)
        assert found == given, "a step changed the findings it was given"
        found, given = out, copy.deepcopy(out)
    assert {f.code for f in found} >= {f.code for f in run_rules(RunView(run), [])}
