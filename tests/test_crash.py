"""A training killed with SIGKILL leaves a readable run that says it crashed."""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
import time

import tuidiag

TRAINING = textwrap.dedent(
    """
    import sys, time, torch
    import tuidiag
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), 0.01)
    rec = tuidiag.Recorder(sys.argv[1], flush_interval=0.2)
    rec.watch(model, opt)
    step = 0
    while True:
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        rec.step(loss)
        opt.step(); opt.zero_grad()
        step += 1
        if step % 50 == 0:
            rec.flush()
            print(step, flush=True)  # every row up to here is on disk
        time.sleep(0.002)
    """
)


def test_sigkill_leaves_a_crashed_run_with_every_flushed_row(run_dir, python) -> None:
    proc = subprocess.Popen([python, "-c", TRAINING, str(run_dir)], stdout=subprocess.PIPE, text=True)
    flushed = 0
    while flushed < 150:
        flushed = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run = tuidiag.open_run(run_dir)
    assert run.status == "crashed"
    steps = run.series("train/loss").steps
    assert steps[: flushed].tolist() == list(range(flushed))  # nothing flushed was lost
    assert len(set(steps.tolist())) == len(steps)
    assert not run.warnings
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"


def test_crashed_status_needs_no_pid_when_the_heartbeat_is_stale(run_dir) -> None:
    rec = tuidiag.Recorder(run_dir)
    rec.log({"a": 1.0})
    rec.flush()
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest.update(host="another-host", heartbeat=time.time() - 120)
    (run_dir / "run.json").write_text(json.dumps(manifest))
    assert tuidiag.open_run(run_dir).status == "crashed"
    rec.close()
    assert tuidiag.open_run(run_dir).status == "finished"
