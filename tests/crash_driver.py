"""Kill trainings with SIGKILL at random moments (used by ``tests/test_faults_crash.py``).

Run as ``python -m tests.crash_driver ROOT TRIALS SEED FLUSH_INTERVAL [MAX_DELAY]``. The driver
imports tuidiag once and then forks one child per trial, so 50 kills cost seconds,
not 50 interpreter start-ups. Each child is a plain training loop without torch:
``Recorder.log`` of one scalar per step, with the wall time at which each step was
logged kept in shared memory. The driver SIGKILLs the child after a random delay,
reaps it, saves the log times as ``ROOT/tNN.times.npy`` and prints one JSON line
per trial. It never reads Parquet itself (the test does, concurrently), so no
Arrow thread pool exists when it forks.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # a training without torch: the recorder skips it
from tuidiag import Recorder  # noqa: E402  # resolved here, before the forks: each child would import the recorder anew

MAX_STEPS = 500_000
READY = MAX_STEPS
"""Slot of the shared array set to 1.0 once the child's Recorder exists."""


def child(run_dir: Path, times: np.ndarray, flush_interval: float) -> None:
    """The training: log step after step until killed."""
    rec = Recorder(run_dir, flush_interval=flush_interval)
    times[READY] = 1.0
    for step in range(MAX_STEPS):
        rec.log({"x": float(step)}, step=step)
        times[step] = time.time()
        if step % 16 == 0:
            time.sleep(0.0005)
    os._exit(0)


def trial(root: Path, index: int, rng: random.Random, flush_interval: float, max_delay: float = 0.4) -> dict:
    """Fork one training, kill it at a random moment, return what the driver knows."""
    shared = mmap.mmap(-1, 8 * (MAX_STEPS + 1))
    times = np.frombuffer(shared, dtype=np.float64)
    run_dir = root / f"t{index:02d}"
    pid = os.fork()
    if pid == 0:
        try:
            child(run_dir, times, flush_interval)
        finally:
            os._exit(1)
    while times[READY] == 0.0:
        time.sleep(0.001)
    time.sleep(rng.uniform(0.0, max_delay))
    os.kill(pid, signal.SIGKILL)
    kill_time = time.time()
    os.waitpid(pid, 0)
    logged = int(np.count_nonzero(times[:MAX_STEPS]))
    np.save(root / f"t{index:02d}.times.npy", times[:logged].copy())
    del times
    shared.close()
    return {"run": str(run_dir), "kill_time": kill_time, "logged": logged}


def main(argv: list[str]) -> int:
    """Run the trials and print one JSON line each."""
    root, trials, seed, flush_interval = Path(argv[0]), int(argv[1]), int(argv[2]), float(argv[3])
    max_delay = float(argv[4]) if len(argv) > 4 else 0.4
    rng = random.Random(seed)
    for index in range(trials):
        print(json.dumps(trial(root, index, rng, flush_interval, max_delay)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
