"""Every CLI command leaves a read-only run byte for byte as it was (``run.json`` says ``"read_only": true``).

The regression: ``tuidiag compact demo_runs/lr-too-high`` wrote ``summaries/`` into a shipped demo run, where
``report`` and the jobs already sent what they write to the cache. ``compact`` of such a run now writes its
summaries to the cache, where the monitor reads them (:func:`tuidiag.store.summary_files.cached_path`).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.app_helpers import DEMO_RUNS
from tests.conftest import full_only
from tuidiag.cli.main import main
from tuidiag.format import METRICS_DIR
from tuidiag.store.discovery import list_shards
from tuidiag.store.summary_files import cached_path, read_levels, shard_rows

RUNS = ["lr-too-high", "vanishing-gradients"]


def _files(directory: Path) -> dict[str, str]:
    """Every path under ``directory`` with the digest of its bytes (directories: empty)."""
    return {str(p.relative_to(directory)): hashlib.sha1(p.read_bytes()).hexdigest() if p.is_file() else ""
            for p in directory.rglob("*")}


def _commands(run: Path, other: Path) -> list[list[str]]:
    """Every command that takes a run (or a directory of runs) and may write somewhere."""
    return [["compact", str(run)], ["report", str(run)], ["diagnose", str(run)], ["compare", str(other), str(run)],
            ["ls", str(run.parent)], ["status", str(run)], ["query", "--root", str(run.parent), "SELECT count(*) FROM metrics"],
            ["act", str(run), "--scale-lr", "0.5", "--wait", "0"], ["act", str(run), "--checkpoint", "--wait", "0"]]


@pytest.mark.parametrize("name", [RUNS[0], *(pytest.param(name, marks=full_only) for name in RUNS[1:])])
def test_no_command_changes_a_read_only_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    for demo in (name, "healthy"):
        shutil.copytree(DEMO_RUNS / demo, runs / demo)  # shipped demos are marked read-only
    run = runs / name
    before = _files(runs)
    for command in _commands(run, runs / "healthy"):
        main(command)  # exit status aside (act on a finished run refuses): nothing in the runs may change
        assert _files(runs) == before, command


@pytest.mark.parametrize("name", RUNS)
def test_compact_of_a_read_only_run_leaves_summaries_the_monitor_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str], name: str) -> None:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / name
    shutil.copytree(DEMO_RUNS / name, run)
    assert main(["compact", str(run)]) == 0
    assert "read-only" in capsys.readouterr().out
    shards = [path for _, path in list_shards(run / METRICS_DIR)]
    assert shards
    for shard in shards:  # the place the monitor looks for the levels of a shard without its own summary
        where = cached_path(run, shard)
        assert where is not None and read_levels(where, shard_rows(shard))
    assert main(["compact", str(run)]) == 0  # a second time: every summary already there
    assert "wrote 0 summaries" in capsys.readouterr().out
