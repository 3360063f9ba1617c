"""A run directory has one writer: the lock ``RUN/.lock`` (``tuidiag.recorder.run_lock``).

A live recorder, in this process or in another, holds its run's lock: a second
``Recorder`` on the same directory follows its resume mode ("never" and "allow"
record into ``dir-N``, "must" raises naming the holder), whatever the manifest's
heartbeat says. The matrix makes the heartbeat lie the ways it can (a pid from
another pid namespace, a stale heartbeat from a disk that refused the manifest, an
unreadable manifest); a hypothesis test starts recorders at the same moment in
every mix of modes and checks that no two share a directory and no row is lost;
a lock left by a SIGKILLed process is taken over.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuidiag
from tuidiag.recorder import run_lock
from tuidiag.store.manifest import read_manifest, write_manifest

ROOT = Path(__file__).resolve().parent.parent
STEPS = 300
MODES = ("never", "allow", "must")

WRITER = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None  # torch-free: starts fast
    import tuidiag
    rec = tuidiag.Recorder(sys.argv[1], resume=sys.argv[2], flush_interval=3600, control=False)
    print(rec.run_dir, flush=True)
    step = 0
    for line in sys.stdin:
        if line.startswith("steps"):
            for _ in range(int(line.split()[1])):
                rec.step(float(sys.argv[3]))
            rec.flush()
        elif line.startswith("close"):
            rec.close()
        print("ok", flush=True)
    """
)


class Writer:
    """A recorder writing one run, in this process or in a child process, driven step by step."""

    def __init__(self, path: Path, where: str, value: float = 1.0, resume: str = "never") -> None:
        self.where = where
        if where == "process":
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            self.child = subprocess.Popen([sys.executable, "-c", WRITER, str(path), resume, str(value)], env=env,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            self.run_dir = Path(self.child.stdout.readline().strip())
        else:
            self.rec = tuidiag.Recorder(path, resume=resume, flush_interval=3600, control=False)
            self.run_dir, self.value = self.rec.run_dir, value

    def steps(self, n: int) -> None:
        """Record ``n`` steps and flush them (the manifest's heartbeat is written too)."""
        if self.where == "process":
            self._say(f"steps {n}")
        else:
            for _ in range(n):
                self.rec.step(self.value)
            self.rec.flush()

    def close(self) -> None:
        if self.where == "process":
            self._say("close")
            self.child.stdin.close()
            assert self.child.wait(timeout=60) == 0
        else:
            self.rec.close()

    def kill(self) -> None:
        self.child.send_signal(signal.SIGKILL)
        self.child.wait(timeout=60)

    def _say(self, line: str) -> None:
        self.child.stdin.write(line + "\n")
        self.child.stdin.flush()
        assert self.child.stdout.readline().strip() == "ok"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _beating(x: Path) -> None:
    pass


def _foreign_pid(x: Path) -> None:
    """The writer's pid is not one this host's process table knows (a container's own pid namespace)."""
    write_manifest(x, dict(read_manifest(x), pid=_dead_pid()))


def _stale_heartbeat(x: Path) -> None:
    """The disk refused the writer's manifest for two days: its heartbeat reads as crashed."""
    write_manifest(x, dict(read_manifest(x), heartbeat=time.time() - 2 * 86400))


def _unreadable_manifest(x: Path) -> None:
    (x / "run.json").write_text("{ half a manifest")


LIES: dict[str, Callable[[Path], None]] = {
    "beating": _beating, "pid from another namespace": _foreign_pid,
    "stale heartbeat": _stale_heartbeat, "unreadable run.json": _unreadable_manifest,
}


def _loss(path: Path) -> list[float]:
    return tuidiag.open_run(path).series("train/loss").values.tolist()


@pytest.mark.parametrize("lie", list(LIES))
@pytest.mark.parametrize("where", ["process", "same process"])
def test_a_second_recorder_never_writes_into_a_live_run(tmp_path: Path, where: str, lie: str,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    x = tmp_path / "x"
    first = Writer(x, where, value=1.0)
    pid = first.child.pid if where == "process" else os.getpid()
    try:
        first.steps(STEPS // 2)
        LIES[lie](x)
        capfd.readouterr()
        seconds = []
        for k, mode in enumerate(MODES):
            if mode == "must":
                with pytest.raises(tuidiag.ResumeError) as raised:
                    tuidiag.Recorder(x, resume=mode, control=False)
                assert f"pid {pid} on {socket.gethostname()}" in str(raised.value) and "not joining" in str(raised.value)
                continue
            second = Writer(x, "same process", value=2.0 + k, resume=mode)
            assert second.run_dir != x
            note = capfd.readouterr().err
            assert f"recording this training into {second.run_dir}" in note
            if mode == "allow":
                assert f"pid {pid} on {socket.gethostname()}" in note
            second.steps(STEPS)
            second.close()
            seconds.append((second.run_dir, 2.0 + k))
        first.steps(STEPS // 2)
        first.close()
    finally:
        if where == "process" and first.child.poll() is None:
            first.kill()
    assert _loss(x) == [1.0] * STEPS  # the first writer lost nothing
    for path, value in seconds:
        assert _loss(path) == [value] * STEPS
    assert len({p for p, _ in seconds}) == len(seconds)
    for mode in ("must", "allow"):  # closed: the lock is free and the run can be continued
        again = Writer(x, "same process", value=9.0, resume=mode)
        assert again.run_dir == x
        again.steps(1)
        again.close()
    assert _loss(x) == [1.0] * STEPS + [9.0, 9.0]


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    x = tmp_path / "x"
    first = Writer(x, "process")
    first.steps(10)
    holder = json.loads((x / run_lock.LOCK_NAME).read_text())
    assert holder["pid"] == first.child.pid and holder["host"] == socket.gethostname()
    first.kill()
    rec = tuidiag.Recorder(x, resume="must", flush_interval=3600, control=False)
    try:
        assert rec.run_dir == x
        assert json.loads((x / run_lock.LOCK_NAME).read_text())["pid"] == os.getpid()
        rec.step(2.0)
    finally:
        rec.close()
    run = tuidiag.open_run(x)
    assert run.series("train/loss").values.tolist() == [1.0] * 10 + [2.0]
    assert run.resumes[0].data["previous_status"] == "crashed"
    assert (x / run_lock.LOCK_NAME).read_text() == ""  # released: no holder named


def test_without_locks_the_heartbeat_still_guards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem without locks (or a read-only one): the manifest's heartbeat and pid decide, as before."""
    monkeypatch.setattr(run_lock, "take", lambda run_dir: None)
    x = tmp_path / "x"
    first = tuidiag.Recorder(x, flush_interval=3600, control=False)
    first.step(1.0)
    try:
        with pytest.raises(tuidiag.ResumeError, match=f"pid {os.getpid()}"):
            tuidiag.Recorder(x, resume="must", control=False)
        second = tuidiag.Recorder(x, resume="allow", flush_interval=3600, control=False)
        assert second.run_dir == tmp_path / "x-1"
        second.close()
    finally:
        first.close()


@settings(max_examples=int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", 25)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(holds_run=st.booleans(), modes=st.lists(st.sampled_from(MODES), min_size=2, max_size=4))
def test_recorders_started_at_once_never_share_a_directory(tmp_path_factory: pytest.TempPathFactory, holds_run: bool,
                                                           modes: list[str]) -> None:
    x = tmp_path_factory.mktemp("race") / "x"
    if holds_run:
        with tuidiag.Recorder(x, flush_interval=3600, control=False) as rec:
            for _ in range(10):
                rec.step(0.5)
    gate = threading.Barrier(len(modes))
    started: dict[int, tuidiag.Recorder] = {}
    refused: dict[int, str] = {}

    def start(k: int, mode: str) -> None:
        gate.wait()
        try:
            started[k] = tuidiag.Recorder(x, resume=mode, flush_interval=0.02, control=False)
        except tuidiag.ResumeError as exc:
            refused[k] = str(exc)

    threads = [threading.Thread(target=start, args=(k, mode)) for k, mode in enumerate(modes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for _ in range(STEPS):  # all write at once
        for k, rec in started.items():
            rec.step(float(k))
    for rec in started.values():
        rec.close()
    dirs = [rec.run_dir for rec in started.values()]
    assert len(set(dirs)) == len(dirs)  # never two writers in one directory
    continued = [k for k, rec in started.items() if rec.run_dir == x]
    assert all(modes[k] != "never" for k in continued) or not holds_run
    for k, rec in started.items():
        before = [0.5] * 10 if holds_run and rec.run_dir == x else []
        assert _loss(rec.run_dir) == before + [float(k)] * STEPS  # every row of every writer
    for k, mode in enumerate(modes):
        if mode != "must":
            assert k in started
        elif not holds_run:
            assert "holds no run" in refused[k] or "not joining" in refused[k]
        elif k not in started:  # another recorder continued the run first
            assert continued and "not joining" in refused[k]
    if holds_run and any(m != "never" for m in modes):
        assert len(continued) == 1
