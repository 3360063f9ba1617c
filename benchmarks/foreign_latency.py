"""Latency from another tracker's flush to the row being in the monitor: TensorBoard, CSV, W&B.

A writer process (``tests/foreign_writers.py``: torch's ``SummaryWriter``, Lightning's
``CSVLogger``, wandb offline) logs one step every ``--interval`` seconds (loss of step
k = 1000 + k) and prints the wall time each flush returned (``SummaryWriter.flush()``,
``CSVLogger.save()``; for W&B the return of ``run.log(..., commit=True)``: wandb-core
then writes its ``.wandb`` file every ``x_transaction_log_flush_interval`` seconds,
15 by default, 0.2 here). A real ``TuidiagApp`` runs headless on the root
(``app.run_test``, real watchdog); a subclass notes the wall time of every refresh that
reached ``app.summaries`` and the run's newest step then (watchdog event ->
FilesChanged -> coalescing -> worker -> ``RunsModel.refresh`` -> message -> overview).

Latency of step k = (first refresh showing step >= k) - (the flush of step k returned).
Printed per kind: p50/p95/max over the steps after a warm-up, against the 2 s target,
and TensorBoard's own reload interval (``tensorboard --reload_interval``, 5 s by default,
plus ``SummaryWriter(flush_secs=120)`` when the training does not flush: documented, not measured).

Usage::

    python benchmarks/foreign_latency.py [--kinds tensorboard lightning wandb] [--steps 30] [--interval 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
TARGET = 2.0
WARMUP = 3
"""Steps left out at the start (the run's first discovery and read)."""


def app_class():
    from tuidiag.app.app import TuidiagApp

    class TimedApp(TuidiagApp):
        """The real app; notes when each refresh's summaries reached ``app.summaries``."""

        seen: list[tuple[float, int]]

        def on_tuidiag_app_runs_refreshed(self, message) -> None:
            super().on_tuidiag_app_runs_refreshed(message)
            steps = [s.step for s in self.summaries if s.step is not None and s.source != "tuidiag"]
            if steps:
                self.seen.append((time.time(), max(steps)))

    return TimedApp


class Writer:
    """``python -m tests.foreign_writers KIND=PATH``: ``log(step)`` returns the wall time the flush returned."""

    def __init__(self, kind: str, path: Path, home: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), WANDB_MODE="offline", WANDB_SILENT="true",
                   WANDB_CACHE_DIR=str(home / "cache"), WANDB_CONFIG_DIR=str(home / "config"), WANDB_DATA_DIR=str(home / "data"))
        self.kind = kind
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.foreign_writers", f"{kind}={path}"], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line.strip()) for line in self.proc.stdout], daemon=True).start()

    def expect(self, prefix: str, timeout: float) -> str:
        line = self.lines.get(timeout=timeout)
        assert line.startswith(prefix), line
        return line

    def log(self, step: int) -> float:
        self.proc.stdin.write(f"{self.kind} {step} {1000.0 + step!r}\n")
        self.proc.stdin.flush()
        return float(self.expect(f"flushed {self.kind}", 60).split()[2])

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        self.proc.wait(60)


async def measure(kind: str, steps: int, interval: float) -> np.ndarray:
    """Latencies (seconds) of the steps after the warm-up."""
    base = Path(tempfile.mkdtemp(prefix="tuidiag-foreign-latency-"))
    root = base / "logs"
    root.mkdir()
    writer = Writer(kind, root / "run" if kind == "tensorboard" else root, base)
    writer.expect("ready", 300)
    TimedApp = app_class()
    app = TimedApp(root)
    app.seen = []
    flushed = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.5)
            assert app.watching, "the app is not watching files (polling): latency would be the poll interval"
            for step in range(steps):
                flushed.append(writer.log(step))
                await pilot.pause(interval)
            await pilot.pause(3.0)
    finally:
        writer.close()
    if not app.seen:
        return np.empty(0)
    times = np.array([t for t, _ in app.seen])
    best = np.maximum.accumulate(np.array([s for _, s in app.seen]))
    ks = np.arange(WARMUP, steps)
    idx = np.searchsorted(best, ks, side="left")  # the first refresh whose newest step >= k
    ok = idx < len(times)
    if not ok.all():
        print(f"  {kind}: {int((~ok).sum())} step(s) never became visible")
    return times[idx[ok]] - np.array(flushed)[ks[ok]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", nargs="+", default=["tensorboard", "lightning", "wandb"], help="writers to measure")
    parser.add_argument("--steps", type=int, default=30, help="steps each writer logs (one flush each)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between steps")
    args = parser.parse_args()
    import tuidiag

    print(f"== tuidiag from {Path(tuidiag.__file__).parent}; cpus={os.cpu_count()}; load {os.getloadavg()[0]:.1f} ==")
    print(f"one step every {args.interval:g} s, {args.steps} steps, first {WARMUP} left out; target p95 <= {TARGET:g} s")
    print("baseline: TensorBoard reloads every 5 s (--reload_interval; documented, not measured): ~2.5 s median, "
          "~5 s worst, after the writer's flush")
    print(f"{'writer':>12} {'n':>4} {'p50 s':>7} {'p95 s':>7} {'max s':>7}  target")
    for kind in args.kinds:
        lat = asyncio.run(measure(kind, args.steps, args.interval))
        if not len(lat):
            print(f"{kind:>12}  no step became visible")
            continue
        p50, p95, mx = np.percentile(lat, 50), np.percentile(lat, 95), lat.max()
        print(f"{kind:>12} {len(lat):>4} {p50:>7.3f} {p95:>7.3f} {mx:>7.3f}  {'met' if p95 <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
