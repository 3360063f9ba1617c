"""A training stopped by Ctrl-C (SIGINT) or SIGTERM reads as ``interrupted``, not ``failed`` or ``crashed``.

Real training processes (``tests/interrupt_training.py``, each run as a script, without
torch, so they start fast) are stopped by a real signal, all at once. For every way a
training can be written (a ``with`` block, a recorder closed at exit, ``except
KeyboardInterrupt``, the training's own SIGTERM handler before or after the recorder's),
the process ends as it would without tuidiag (same exit status), its run says
``interrupted`` in ``tuidiag ls``, ``tuidiag status`` and the monitor, and every step it
recorded is on disk. A forked worker that is terminated ends alone and leaves the run as it was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.interrupt_training import OWN_EXIT, READY_AT
from tuidiag.cli.main import main
from tuidiag.store import open_run
from tuidiag.viewmodel.model import RunsModel

CASES = {  # name (signal_case) -> the exit status the training ends with, as it would without tuidiag
    "SIGTERM_with": -signal.SIGTERM,
    "SIGTERM_plain": -signal.SIGTERM,
    "SIGTERM_own-before": OWN_EXIT,
    "SIGTERM_own-after": OWN_EXIT,
    "SIGINT_with": -signal.SIGINT,  # Python ends by SIGINT after an uncaught KeyboardInterrupt
    "SIGINT_plain": -signal.SIGINT,
    "SIGINT_caught": 0,
}
WORKER = "SIGTERM_worker"


def _trainings(python: str, root: Path) -> tuple[dict[str, int], list[str]]:
    """Start every training, signal each once it is ready; (exit status by name, the worker run's report)."""
    procs = {name: subprocess.Popen([python, str(ROOT / "tests" / "interrupt_training.py"), str(root / name),
                                     name.split("_", 1)[1]], cwd=ROOT, stdout=subprocess.PIPE, text=True)
             for name in [*CASES, WORKER]}
    codes, report = {}, []
    try:
        for name, proc in procs.items():
            word, pid = proc.stdout.readline().split()  # "ready PID": the training's, or its forked worker's
            assert word == "ready", name
            os.kill(int(pid), getattr(signal, name.split("_")[0]))
        for name, proc in procs.items():
            for line in proc.stdout:
                word, *rest = line.split()
                if word == "worker":
                    report = rest
            codes[name] = proc.wait(60)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    return codes, report


def test_a_signalled_training_reads_as_interrupted_everywhere(tmp_path: Path, python: str, capsys) -> None:
    root = tmp_path / "runs"
    codes, worker = _trainings(python, root)
    assert codes == {**CASES, WORKER: 0}
    assert worker == [str(-signal.SIGTERM), "running"]  # the worker died by SIGTERM; the run was left running

    for name in CASES:
        run = open_run(root / name)
        steps = run.series("train/loss").steps
        last = json.loads((run.path / "run.json").read_text())["last_step"]
        assert run.status == "interrupted" and not run.warnings, name
        assert len(steps) >= READY_AT and np.array_equal(steps, np.arange(last + 1)), name  # every step, no gap
    assert open_run(root / WORKER).status == "finished"

    capsys.readouterr()
    assert main(["ls", str(root)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert {row[0]: row[1] for row in rows} == {**dict.fromkeys(CASES, "interrupted"), WORKER: "finished"}
    assert main(["status", str(root / "SIGTERM_plain")]) == 0
    assert "interrupted" in capsys.readouterr().out
    model = RunsModel(root)  # what tuidiag watch lists
    model.discover()
    assert sorted(s.status for s in model.refresh()) == ["finished"] + ["interrupted"] * len(CASES)


@pytest.mark.parametrize("exc_type, sigterm, status", [
    (None, False, "finished"), (ValueError, False, "failed"), (KeyboardInterrupt, False, "interrupted"),
    (SystemExit, False, "failed"), (None, True, "interrupted"), (ValueError, True, "interrupted"),
])
def test_end_status_names_each_ending(monkeypatch, exc_type, sigterm, status) -> None:
    from tuidiag.recorder import process

    monkeypatch.setitem(process._state, "sigterm", sigterm)
    assert process.end_status(exc_type) == status


_EXEC_AFTER_CTRL_C = """
import os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises, as in a terminal (a test worker may ignore it)
sys.modules["torch"] = None
import tuidiag
rec = tuidiag.Recorder(sys.argv[1], flush_interval=0.1)
if sys.argv[2] == "exec":  # a thread runs a string exec (as an import does) once the Ctrl-C is uncaught
    uncaught, hook = threading.Event(), sys.excepthook
    sys.excepthook = lambda *exc: (uncaught.set(), hook(*exc))
    threading.Thread(target=lambda: (uncaught.wait(), exec("x = 1"))).start()
for step in range(10 ** 6):
    rec.step(1.0)
    if step == 5:
        os.write(1, b"ready\\n")
    time.sleep(0.002)
"""


@pytest.mark.parametrize("after", ["exec", "nothing"])
def test_ctrl_c_ends_by_sigint_even_after_a_string_exec(tmp_path: Path, python: str, after: str) -> None:
    """CPython forgets an uncaught Ctrl-C when any string ``exec``/``eval`` runs after it (an import
    on the recorder's threads did, under load): the training must still end by SIGINT, never status 1."""
    script = tmp_path / "train.py"
    script.write_text(_EXEC_AFTER_CTRL_C)
    proc = subprocess.Popen([python, str(script), str(tmp_path / "run"), after], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline() == b"ready\n"
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(60) == -signal.SIGINT
    finally:
        if proc.poll() is None:
            proc.kill()  # never left running: a stray child reads as a DataLoader worker in later tests
    assert open_run(tmp_path / "run").status == "interrupted"
