"""Disk full and read-only: training continues, one report, bounded memory, nothing corrupted, recovery.

Two ways to make writes fail: an injected failing filesystem (the writer's and the
manifest's write functions raise ``OSError(ENOSPC)`` while a switch is on; runs
anywhere) and, when the tests run as root, a real 512 KiB tmpfs filled with a
ballast file and then remounted read-only.
"""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import tuidiag
from tuidiag.recorder import placement, run_manifest, writer


class FailingDisk:
    """While ``full`` is set, every shard and manifest write raises ``OSError(ENOSPC)``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        self.refused = 0
        monkeypatch.setattr(writer, "write_table_atomic", self._wrap(writer.write_table_atomic))
        monkeypatch.setattr(run_manifest, "write_manifest", self._wrap(run_manifest.write_manifest))
        monkeypatch.setattr(placement, "claim_manifest", self._wrap(placement.claim_manifest))

    def _wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def write(*args: Any, **kwargs: Any) -> Any:
            if self.full:
                self.refused += 1
                raise OSError(errno.ENOSPC, "No space left on device (injected)")
            return real(*args, **kwargs)

        return write


def _digests(run_dir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (run_dir / "metrics").glob("r*.parquet")}


def _log(rec: tuidiag.Recorder, steps: range) -> None:
    for step in steps:
        rec.log({"x": float(step)}, step=step)
        rec.step(1.0 / (step + 1), step=step)


def test_full_disk_keeps_training_reports_once_and_recovers(run_dir, monkeypatch, capfd) -> None:
    disk = FailingDisk(monkeypatch)
    rec = tuidiag.Recorder(run_dir, flush_interval=0.05)
    _log(rec, range(0, 100))
    rec.flush()
    before = _digests(run_dir)
    disk.full = True
    for chunk in range(5):  # five flushes refused
        _log(rec, range(100 + 100 * chunk, 200 + 100 * chunk))
        rec.flush()
    assert disk.refused >= 5
    assert _digests(run_dir) == before  # nothing already written was touched
    assert tuidiag.open_run(run_dir).warnings == []
    disk.full = False
    _log(rec, range(600, 700))
    rec.close()
    err = capfd.readouterr().err
    assert err.count("recorder error in writer.write") == 1 and "No space left" in err
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished" and run.warnings == []
    assert run.series("x").steps.tolist() == list(range(700))  # every row, once
    errors = [e for e in run.events if e.kind == "recorder_error"]
    assert sum("writer.write" in e.data["where"] for e in errors) == 1
    assert rec.errors.count >= 5


def test_buffer_while_disk_is_full_is_bounded_and_keeps_the_newest_rows(run_dir, monkeypatch) -> None:
    monkeypatch.setattr(writer, "MAX_BUFFERED_ROWS", 1_000)
    disk = FailingDisk(monkeypatch)
    rec = tuidiag.Recorder(run_dir, flush_interval=3600)
    disk.full = True
    for chunk in range(10):
        _log(rec, range(chunk * 400, (chunk + 1) * 400))
        rec.flush()
        held = sum(len(part[0]) for part in rec._writer._rows)
        assert held <= 1_000 + 400 * 2  # the bound, plus the flush in progress
    disk.full = False
    rec.close()
    steps = tuidiag.open_run(run_dir).series("x").steps
    assert steps[-1] == 3999 and len(steps) < 4000  # the newest kept, the oldest dropped
    assert steps.tolist() == list(range(steps[0], 4000))
    assert rec.dropped_rows > 0
    assert tuidiag.open_run(run_dir).series("recorder/dropped_rows").last == rec.dropped_rows


def test_a_recorder_started_on_a_full_disk_never_raises(run_dir, monkeypatch, capfd) -> None:
    disk = FailingDisk(monkeypatch)
    disk.full = True
    rec = tuidiag.Recorder(run_dir, flush_interval=0.05)  # run.json cannot be written
    _log(rec, range(50))
    rec.flush()
    assert "recorder error in start" in capfd.readouterr().err
    disk.full = False
    rec.close()
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished" and len(run.series("x")) == 50


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 512 KiB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount: Path) -> Path:
    ballast = mount / "ballast"
    with open(ballast, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
        except OSError:
            pass
    return ballast


def _remount_read_only(mount: Path) -> None:
    """Remount ``mount`` read-only. The kernel refuses (EBUSY, status 32) while a file there is open
    for writing, which the recorder's threads do at any moment of a live run: retry until it takes."""
    deadline = time.monotonic() + 30
    while (done := subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True)).returncode == 32:
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.01)
    assert done.returncode == 0, done.stderr


def test_real_tmpfs_full_then_read_only_then_space_returns(tiny_tmpfs, capfd) -> None:
    run_dir = tiny_tmpfs / "run"
    rec = tuidiag.Recorder(run_dir, flush_interval=0.05)
    _log(rec, range(0, 100))
    rec.flush()
    before = _digests(run_dir)
    ballast = _fill(tiny_tmpfs)
    _log(rec, range(100, 300))
    rec.flush()
    assert _digests(run_dir) == before
    _remount_read_only(tiny_tmpfs)
    try:
        _log(rec, range(300, 400))
        rec.flush()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tiny_tmpfs)], check=True)
    ballast.unlink()
    _log(rec, range(400, 500))
    rec.close()
    assert "No space left on device" in capfd.readouterr().err
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished" and run.warnings == []
    assert run.series("x").steps.tolist() == list(range(500))
    assert not [p for p in run_dir.rglob(".*") if p.name.endswith(".partial")]  # no temporary file left behind
