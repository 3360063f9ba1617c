"""Training loops stopped by a signal (used by ``tests/test_interrupted.py``).

Run as a script, ``python tests/interrupt_training.py RUN_DIR CASE``, as a user runs
``python train.py``: one training process recording into ``RUN_DIR``. (Not ``-m``, and not
forked from a driver: there CPython ends an uncaught ``KeyboardInterrupt`` with status 1
even without tuidiag, so the exit status would not be the one a user sees.) A training
records one loss per step without
torch, writes ``ready PID`` after :data:`READY_AT` steps and goes on until a signal stops
it. ``CASE`` says how the training is written:

- ``with``: ``with Recorder(...)``, nothing else;
- ``plain``: a Recorder never closed (``atexit`` closes it);
- ``caught``: ``except KeyboardInterrupt: rec.close()``, then a normal exit;
- ``own-before`` / ``own-after``: the training's own SIGTERM handler (``sys.exit(143)``),
  installed before the Recorder, or after it and calling the handler it replaced;
- ``worker``: a forked child (as a DataLoader worker is) writes its ``ready PID`` instead;
  the test SIGTERMs that child; the training then writes ``worker EXIT STATUS`` (the
  child's exit status, and the run's status in ``run.json`` at that moment) and finishes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

if __name__ == "__main__":  # a training without torch (the recorder skips it); never when the tests import this
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
import tuidiag  # noqa: E402
import tuidiag.recorder.recorder  # noqa: E402,F401

READY_AT = 20
OWN_EXIT = 143


def _say(text: str) -> None:
    """One line on stdout in one system call (lines of several processes never mix, and a
    signal never lands inside a buffered write)."""
    os.write(1, f"{text}\n".encode())


def _exit_143(signum: int, frame: object) -> None:
    sys.exit(OWN_EXIT)


def main(run_dir: str, case: str) -> None:
    """One training, written as ``case`` says."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises, as in a terminal (a background job ignores it)
    if case == "own-before":
        signal.signal(signal.SIGTERM, _exit_143)
    rec = tuidiag.Recorder(run_dir, flush_interval=0.1)
    if case == "own-after":
        previous = signal.getsignal(signal.SIGTERM)

        def chained(signum: int, frame: object) -> None:
            if callable(previous):
                previous(signum, frame)
            sys.exit(OWN_EXIT)

        signal.signal(signal.SIGTERM, chained)
    if case == "worker":
        _with_worker(rec)
    elif case == "with":
        with rec:
            _loop(rec)
    elif case == "caught":
        try:
            _loop(rec)
        except KeyboardInterrupt:
            rec.close()
    else:
        _loop(rec)


def _loop(rec: tuidiag.Recorder) -> None:
    step = 0
    while True:
        rec.step(1.0 / (step + 1))
        step += 1
        if step == READY_AT:
            _say(f"ready {os.getpid()}")
        time.sleep(0.002)


def _with_worker(rec: tuidiag.Recorder) -> None:
    for step in range(READY_AT):
        rec.step(1.0 / (step + 1))
    pid = os.fork()
    if pid == 0:  # the worker: waits to be terminated
        _say(f"ready {os.getpid()}")
        while True:
            time.sleep(0.05)
    _, status = os.waitpid(pid, 0)
    seen = json.loads((rec.run_dir / "run.json").read_text())["status"]  # what the worker's end left there
    for step in range(READY_AT, 2 * READY_AT):
        rec.step(1.0 / (step + 1))
    _say(f"worker {os.waitstatus_to_exitcode(status)} {seen}")
    rec.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
