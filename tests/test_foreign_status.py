"""The status of a TensorBoard log read live: what its files can tell, and no more.

``SummaryWriter.close()`` writes nothing, but an event file's name carries its writer's host
and pid: once that process is gone (on this host) the run reads ``exited`` at once, not
``running`` for two more minutes. Otherwise the age of the last write decides: ``running``,
then ``idle``, then (writer unseen) ``unknown``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.sources.foreign_run import ACTIVE_WRITE, RECENT_WRITE, STATUS_EXITED, STATUS_IDLE, STATUS_UNKNOWN
from tuidiag.sources.tensorboard_source import TensorBoardSource, event_files, writer_of

WRITER = """
import sys, time
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter
w = EventFileWriter(sys.argv[1])
for step in range(3):
    w.add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=[Summary.Value(tag="train/loss", simple_value=1.0 / (step + 1))])))
w.close()
print("closed", flush=True)
sys.stdin.readline()  # alive, writer closed, until told to exit
"""
"""TensorBoard's own event file writer, the one torch's ``SummaryWriter`` writes through (without torch's import time)."""


def _age(log: Path, seconds: float) -> None:
    """Make every event file of ``log`` look last written ``seconds`` ago."""
    for path in event_files(log):
        then = time.time() - seconds
        os.utime(path, (then, then))


def _status(log: Path) -> str:
    return TensorBoardSource().open(log).status


def test_a_closed_writer_reads_idle_while_its_process_lives_and_exited_once_it_is_gone(tmp_path: Path) -> None:
    log = tmp_path / "tb"
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(log)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "closed"
        (path,) = event_files(log)
        assert writer_of(path.name) == (socket.gethostname(), process.pid)
        assert _status(log) == "running"  # written just now, by a process that exists
        for age in (ACTIVE_WRITE + 5, RECENT_WRITE + 600):  # closed, but its process may write again
            _age(log, age)
            assert _status(log) == STATUS_IDLE
        _age(log, 0)
    finally:
        process.communicate("\n", timeout=30)
    assert _status(log) == STATUS_EXITED  # at once, however recent the last write


@pytest.mark.parametrize("age,expected", [(0, "running"), (ACTIVE_WRITE + 5, STATUS_IDLE), (RECENT_WRITE + 5, STATUS_UNKNOWN)])
def test_a_log_from_another_host_goes_by_the_age_of_its_last_write(tmp_path: Path, age: float, expected: str) -> None:
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    log = tmp_path / "tb"
    writer = EventFileWriter(str(log))
    writer.close()
    (path,) = event_files(log)
    path.rename(log / f"events.out.tfevents.1700000000.not-{socket.gethostname()}.example.{os.getpid()}.0")
    _age(log, age)
    assert _status(log) == expected


host_part = st.text("abcxyz019-", min_size=1, max_size=6)


@settings(max_examples=examples(40), deadline=None)
@given(host=st.lists(host_part, min_size=1, max_size=4).map(".".join), pid=st.integers(1, 2**22),
       stamp=st.integers(10**9, 2 * 10**9), counter=st.integers(0, 99), suffix=st.sampled_from(["", ".v2", ".profile-empty"]))
def test_writer_of_reads_the_host_and_pid_torch_and_tensorflow_write(host: str, pid: int, stamp: int, counter: int,
                                                                    suffix: str) -> None:
    assert writer_of(f"events.out.tfevents.{stamp}.{host}.{pid}.{counter}{suffix}") == (host, pid)
    assert writer_of(f"events.out.tfevents.{stamp}.nohost") is None  # no pid: nothing to check
