"""``tuidiag report`` without ``-o`` leaves a read-only run as it was: the report goes to the cache.

The regression: ``tuidiag report demo_runs/overfitting`` created ``demo_runs/overfitting/report/`` in the
shipped, read-only demo runs (``git status`` dirty), where jobs on them already kept their results in the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app_helpers import DEMO_RUNS
from tuidiag.cli.main import main
from tuidiag.store.job_results import READ_ONLY
from tuidiag.store.report_place import default_report_dir


def _tree(directory: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``directory`` with its (mtime, size): what a write into it would change."""
    return {str(p.relative_to(directory)): (p.stat().st_mtime_ns, p.stat().st_size) for p in directory.rglob("*")}


@pytest.mark.parametrize("report_exists", [False, True])
@pytest.mark.parametrize("marked", [None, False, True, "yes"])
def test_only_a_run_marked_read_only_sends_its_report_to_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   marked: object, report_exists: bool) -> None:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"name": "run"} | ({} if marked is None else {READ_ONLY: marked})))
    if report_exists:
        (run_dir / "report").mkdir()
    out, cached = default_report_dir(run_dir)
    assert cached == (marked is True)  # only a JSON true marks it, as for job results
    assert (out.is_relative_to(tmp_path / "cache") if cached else out == run_dir / "report")
    assert default_report_dir(run_dir) == (out, cached)  # one run, one place, every time


def test_report_on_a_shipped_demo_run_writes_nothing_into_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    run_dir = DEMO_RUNS / "lr-too-low"  # the smallest shipped demo: any of them is marked read-only
    before = _tree(run_dir)
    assert main(["report", str(run_dir)]) == 0
    assert _tree(run_dir) == before
    said = capsys.readouterr()
    path = Path(said.out.strip())
    assert path.is_file() and path.is_relative_to(tmp_path / "cache") and path.name == "report.md"
    assert "read-only" in said.err and "cache" in said.err
