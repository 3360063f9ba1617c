"""Corrupt and foreign input: the reader, ``ls``, ``diagnose``, ``report`` and the monitor keep
running and say what they skipped.

One root holds a healthy run beside runs with every kind of bad file: truncated,
zero-byte, garbage, wrong-schema, wrong-type and future-version shards, a FIFO, a
device, a directory and a symlink loop named like shards, malformed, non-object,
odd-typed, FIFO and missing ``run.json``, a clock that jumped backwards, and a
symlink loop in the root. Permission denied is injected (the tests may run as root).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tuidiag
from tests.app_helpers import wait_for
from tuidiag.cli.main import main
from tuidiag.format import FORMAT_VERSION_KEY, METRICS_SCHEMA
from tuidiag.store import decode
from tuidiag.store.manifest import write_manifest

BAD_SHARDS = 12
"""Bad files in the ``badshards`` run, each one reader warning."""


def _good_run(run_dir: Path, steps: int = 60) -> None:
    with tuidiag.Recorder(run_dir, flush_interval=3600, config={"lr": 0.1}) as rec:
        for step in range(steps):
            rec.step(2.0 / (step + 1))
            if step % 20 == 0:
                rec.flush()


def _bad_shards(run_dir: Path) -> None:
    _good_run(run_dir)
    metrics = run_dir / "metrics"
    good = next(metrics.glob("r0-*.parquet")).read_bytes()
    name = "r0-{0:09d}-{0:09d}.parquet".format
    (metrics / name(100)).write_bytes(good[: len(good) // 2])
    (metrics / name(101)).write_bytes(b"")
    (metrics / name(102)).write_bytes(b"PAR1" + os.urandom(300) + b"PAR1")
    pq.write_table(pa.table({"a": [1, 2]}), metrics / name(103))
    future = pa.table({f.name: pa.array([], f.type) for f in METRICS_SCHEMA})
    future = future.replace_schema_metadata({FORMAT_VERSION_KEY: b"999"})
    pq.write_table(future, metrics / name(104))
    wrong_types = {f.name: pa.array(["x"], pa.string()) for f in METRICS_SCHEMA}
    pq.write_table(pa.table(wrong_types), metrics / name(105))
    os.mkfifo(metrics / name(106))  # opening it would block forever
    (metrics / name(107)).symlink_to("/dev/zero")
    (metrics / name(108)).symlink_to(name(108))  # loop
    (metrics / name(109)).mkdir()
    (run_dir / "events" / name(110)).write_bytes(b"\x00" * 64)
    (metrics / name(111)).write_bytes(good[:-9] + b"\xff" * 9)  # footer mangled
    (metrics / ".r0-000000112-000000112.parquet.abc.partial").write_bytes(good[:10])  # ignored, no warning


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of runs, most of them damaged."""
    root = tmp_path_factory.mktemp("hostile")
    _good_run(root / "good")
    _bad_shards(root / "badshards")
    manifests = {"badjson": "{not json", "arrayjson": "[1, 2]", "hugeint": '{"status": "running", "pid": 1e999}'}
    for name, text in manifests.items():
        _good_run(root / name)
        (root / name / "run.json").write_text(text)
    _good_run(root / "oddtypes")
    odd = {"status": 5, "heartbeat": "soon", "flush_interval": "x", "name": {"a": 1}, "config": "s", "pid": "abc"}
    (root / "oddtypes" / "run.json").write_text(json.dumps(odd))
    _good_run(root / "nojson")
    (root / "nojson" / "run.json").unlink()
    _good_run(root / "fifojson")
    (root / "fifojson" / "run.json").unlink()
    os.mkfifo(root / "fifojson" / "run.json")
    _clock_backwards(root / "clock")
    (root / "loop").symlink_to(root)
    (root / "empty" / "metrics").mkdir(parents=True)
    return root


def _clock_backwards(run_dir: Path) -> None:
    """Wall times that go back by an hour mid-run, a resumed step counter, a heartbeat from the future."""
    rec = tuidiag.Recorder(run_dir, flush_interval=3600)
    for step in range(40):
        rec.log({"train/loss": 1.0 / (step + 1)}, step=step if step < 20 else step - 20)
    rec.close()
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest.update(status="running", heartbeat=time.time() + 86400, created=time.time() + 86400)
    write_manifest(run_dir, manifest)
    table = pq.read_table(next((run_dir / "metrics").glob("r0-*.parquet")))
    walls = pa.array([time.time() - 3600 * (i % 3) for i in range(table.num_rows)], pa.float64())
    table = table.set_column(1, "wall_time", walls)
    pq.write_table(table, next((run_dir / "metrics").glob("r0-*.parquet")))


def test_the_reader_skips_every_bad_file_with_a_warning(hostile_root: Path) -> None:
    run = tuidiag.open_run(hostile_root / "badshards")
    assert len(run.series("train/loss")) == 60  # the good rows are all read
    assert len(run.warnings) == BAD_SHARDS, run.warnings
    assert run.refresh() == 0 and len(run.warnings) == BAD_SHARDS  # not re-read, not re-warned
    for name in ("badjson", "arrayjson", "nojson", "fifojson"):
        bad = tuidiag.open_run(hostile_root / name)
        assert len(bad.series("train/loss")) == 60 and bad.warnings and bad.status == "unknown", name
    assert tuidiag.open_run(hostile_root / "hugeint").status == "running"  # pid inf: no pid check, no heartbeat
    odd = tuidiag.open_run(hostile_root / "oddtypes")
    assert odd.status == "5" and odd.name == "{'a': 1}" and len(odd.series("train/loss")) == 60
    clock = tuidiag.open_run(hostile_root / "clock")
    assert clock.series("train/loss").steps.tolist() == sorted(list(range(20)) * 2)


def test_permission_denied_is_a_skipped_file(hostile_root: Path, monkeypatch) -> None:
    real = decode.pq.ParquetFile
    denied = str(next((hostile_root / "good" / "metrics").glob("r0-*.parquet")))

    def refusing(path, *args, **kwargs):
        if str(path) == denied:
            raise PermissionError(13, "Permission denied", denied)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(decode.pq, "ParquetFile", refusing)
    run = tuidiag.open_run(hostile_root / "good")
    assert any("Permission denied" in w for w in run.warnings)


def test_ls_lists_every_run_and_prints_the_warnings(hostile_root: Path, capsys) -> None:
    assert main(["ls", str(hostile_root)]) == 0
    out = capsys.readouterr().out
    for name in ("good", "badshards", "badjson", "nojson", "fifojson", "clock", "oddtypes", "empty"):
        assert name in out
    assert out.count("warning:") >= BAD_SHARDS + 5
    assert "not a regular file" in out and "newer tuidiag" in out


@pytest.mark.parametrize(
    "name", ["badshards", "badjson", "arrayjson", "oddtypes", "nojson", "fifojson", "clock", "empty", "hugeint"]
)
def test_diagnose_keeps_going_and_names_what_it_skipped(hostile_root: Path, name: str, capsys) -> None:
    assert main(["diagnose", str(hostile_root / name)]) == 0
    out = capsys.readouterr().out
    assert "Diagnosis of" in out
    if name not in ("clock", "empty", "oddtypes", "hugeint"):
        assert "Skipped:" in out
    assert main(["diagnose", "--json", str(hostile_root / name)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert isinstance(result["skipped"], list)


@pytest.mark.parametrize("name", ["badshards", "fifojson", "clock", "empty"])
def test_report_keeps_going_and_lists_what_it_skipped(hostile_root: Path, name: str, tmp_path: Path, capsys) -> None:
    assert main(["report", str(hostile_root / name), "-o", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    if name in ("badshards", "fifojson"):
        assert "not a regular file" in text or "run.json" in text


def test_cli_errors_are_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("x")
    missing, a_file = str(tmp_path / "nope"), str(tmp_path / "file")
    commands = (["diagnose", missing], ["report", a_file], ["ls", missing])
    for command in commands:
        assert main(command) == 2
        captured = capsys.readouterr()
        message = (captured.err or captured.out).strip()
        assert message and "\n" not in message and "Traceback" not in message


async def test_monitor_keeps_running_and_shows_what_it_skipped(hostile_root: Path) -> None:
    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.run_screen import RunScreen
    from tuidiag.app.widgets.diagnosis_panel import DiagnosisPanel
    from textual.widgets import Static

    app = TuidiagApp(hostile_root, poll=True)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 10)
        app.open_run(str(hostile_root / "badshards"))
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        text = str(app.screen.query_one(DiagnosisPanel).query_one("#diagnosis-text", Static).render())
        assert f"Skipped ({BAD_SHARDS})" in text and "newer tuidiag" in text and "7 more" in text
        assert app.is_running


async def test_monitor_survives_a_run_directory_deleted_while_watched(tmp_path: Path) -> None:
    import shutil

    from tuidiag.app.app import TuidiagApp

    _good_run(tmp_path / "a")
    _good_run(tmp_path / "b")
    app = TuidiagApp(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 2)
        app.open_run(str(tmp_path / "a"))
        await pilot.pause(0.3)
        shutil.rmtree(tmp_path / "a")
        shutil.rmtree(tmp_path / "b")
        app.action_reload()
        assert await wait_for(pilot, lambda: len(app.summaries) <= 1 or any(s.warnings for s in app.summaries))
        await pilot.press("escape")
        await pilot.pause(0.3)
        assert app.is_running
    assert app.return_code in (None, 0)


def test_fifo_manifest_does_not_block_discovery_in_a_subprocess(hostile_root: Path, python: str) -> None:
    import subprocess

    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    command = [python, "-m", "tuidiag", "ls", str(hostile_root)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and "fifojson" in done.stdout
