"""``tuidiag status RUN``: the one-line summary, its cached finding (inline and in the background), exit codes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tuidiag
from tuidiag.cli import status_cache
from tuidiag.cli.main import main
from tuidiag.cli.status_cache import top_entry
from tuidiag.cli.status_cmd import UNICODE, _finding
from tuidiag.diagnosis import Finding
from tuidiag.diagnosis.codes import CODES, badge
from tuidiag.store.tail import latest

DEMO = Path(__file__).resolve().parent.parent / "demo_runs"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache directory (the background refresher inherits it through the environment)."""
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["status", *args]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return out.strip()


def test_line_of_a_finished_run(capsys: pytest.CaptureFixture[str]) -> None:
    line = _line(capsys, str(DEMO / "lr-too-high"))
    name, progress, finding, age = line.split(" \N{BLACK RIGHT-POINTING SMALL TRIANGLE} ")
    assert name == "lr-too-high" and progress == "step 254 loss nan"
    assert finding.startswith("LR too high ") and finding.endswith("%")
    assert age.startswith("failed, last data ") and age.endswith(" ago")  # the age is of the data, not of the end
    assert _line(capsys, "--ascii", "--no-diagnosis", str(DEMO / "healthy")).startswith(
        "healthy > step 1,499 loss 0.1157 > finished"
    )


def test_newest_loss_comes_from_the_end_of_the_run(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=60.0) as rec:
        for step in range(300):
            rec.log({"train/loss": 1.0 / (step + 1), "other": 0.0}, step=step)
        rec.flush()
        rec.log({"other": 1.0}, step=300)  # the newest shard has no loss: look further back
    found = latest(tmp_path / "run", "train/loss")
    assert found is not None and found.step == 299 and found.value == pytest.approx(1 / 300)
    assert latest(tmp_path / "run", "never/logged") is None


def test_running_run_in_tmux_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tuidiag.Recorder(tmp_path / "run", name="exp #5 #[fg=red]", flush_interval=60.0)
    for step in range(50):
        rec.log({"train/loss": 0.5}, step=step)
    rec.flush()
    try:
        line = _line(capsys, "--tmux", "--ascii", str(tmp_path / "run"))
    finally:
        rec.close()
    assert line.startswith("exp ##5 ##[fg=red] > step 49 loss 0.5 > #[fg=")
    assert line.endswith("s ago") and "running" not in line


def test_large_run_is_diagnosed_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(status_cache, "INLINE_BYTES", 0)  # every run counts as large
    run = tmp_path / "run"
    with tuidiag.Recorder(run, flush_interval=60.0) as rec:
        for step, loss in enumerate(np.linspace(2.0, 0.1, 200)):
            rec.log({"train/loss": float(loss)}, step=step)
    assert _line(capsys, "--ascii", str(run)).split(" > ")[2] == "diagnosing..."
    deadline = time.monotonic() + 120
    while status_cache.load(run) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    entry = status_cache.load(run)
    assert entry is not None and entry["top"]["code"] == "healthy" and entry["step"] == 199
    assert _line(capsys, "--ascii", str(run)).split(" > ")[2] == "healthy"
    with tuidiag.Recorder(run, flush_interval=60.0, resume="allow") as rec:  # resumed: new data, the cached finding is now stale
        rec.log({"train/loss": 0.05}, step=200)
    assert _line(capsys, "--ascii", str(run)).split(" > ")[2] == "healthy*"


def test_not_a_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(tmp_path / "nope")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["status", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and err.count("is not a run (no run.json or metrics/") == 1


def test_unwritable_cache_still_prints_the_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(blocker))
    assert _line(capsys, "--ascii", str(DEMO / "lr-too-low")).split(" > ")[2].startswith("LR too low ")


def _listings(monkeypatch: pytest.MonkeyPatch, table: Path) -> list[str]:
    """Every later listing of ``table`` (the real ``os.listdir`` runs; each call on it is noted)."""
    import os

    calls: list[str] = []
    real = os.listdir

    def noting(path: Any = ".") -> list[str]:
        if Path(path) == table:
            calls.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", noting)
    return calls


@pytest.mark.parametrize("mode", ["no-diagnosis", "cached", "no-summary", "stale-cache", "first-diagnosis"])
def test_one_call_lists_metrics_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                     mode: str) -> None:
    """``tuidiag status`` runs every second: its signature and its newest loss share one listing of ``metrics/``
    (a first diagnosis reads the run whole, and lists it once more for that)."""
    import json

    run = tmp_path / "run"
    with tuidiag.Recorder(run, flush_interval=60.0) as rec:
        for step in range(30):
            rec.log({"train/loss": 1.0 / (step + 1)}, step=step)
    if mode == "no-summary":  # a run of format 1: the newest loss read from the shards, as listed
        manifest = json.loads((run / "run.json").read_text())
        manifest.pop("summary")
        (run / "run.json").write_text(json.dumps(manifest))
    if mode != "first-diagnosis":
        _line(capsys, str(run))  # diagnosed inline once: cached
    if mode == "stale-cache":
        monkeypatch.setattr(status_cache, "INLINE_BYTES", 0)
        monkeypatch.setattr(status_cache, "start_background", lambda _run: None)  # no refresher process in this test
        with tuidiag.Recorder(run, flush_interval=60.0, resume="allow") as rec:
            rec.log({"train/loss": 0.01}, step=30)
    calls = _listings(monkeypatch, run / "metrics")
    args = ["--no-diagnosis"] if mode == "no-diagnosis" else []
    line = _line(capsys, "--ascii", *args, str(run))
    assert len(calls) == (2 if mode == "first-diagnosis" else 1), line
    assert ("step 30 loss 0.01" if mode == "stale-cache" else "step 29 loss 0.03333") in line


@pytest.mark.parametrize("code", sorted(set(CODES) - {"unreadable"}))  # unreadable: what to do, its title
def test_every_code_is_named_as_the_monitor_names_it(code: str) -> None:
    """The status line names a finding by its badge, the one name the overview and the report's views give it."""
    finding = Finding(code, CODES[code].meaning, 0.8, "warning", [], CODES[code].fix)
    for tmux in (False, True):
        text = _finding(top_entry(finding), True, UNICODE, tmux)
        shown = text.removeprefix("#[fg=yellow]").removesuffix("#[default]")
        assert shown.startswith(badge(code).replace("#", "##")), (code, text)
        assert code == badge(code) or code not in shown
