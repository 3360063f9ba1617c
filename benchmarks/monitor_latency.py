"""Latency from ``rec.step()`` in a live training process to the value being in the monitor's data.

A separate training process (plain ``rec.step(loss)`` at ``--rate`` steps/s, no
torch: the loss of step k is ``1000 + k``) writes a run while this process
watches the root two ways at once:

- ``app``: a real ``TuidiagApp`` running headless (``app.run_test``); a subclass
  notes the wall time of every ``RunsRefreshed`` it handles and the newest step
  it carried (watchdog event -> FilesChanged -> 0.25 s coalescing -> worker ->
  ``RunsModel.refresh`` -> message -> ``app.summaries``);
- ``model``: the same ``RunWatcher`` + ``RunsModel`` without the UI: each watcher
  callback refreshes the model at once on a thread (no coalescing).

For each step recorded after a warm-up, latency = (first time a refresh showed a
step >= k) - (wall time ``rec.step`` stored for step k). Printed: p50/p95/max per
flush interval and path, against the flush interval itself (the floor: a row
waits on average half an interval before it is written) and TensorBoard's
documented default (``SummaryWriter(flush_secs=120)``: ~60 s median, not measured).

Targets: p95 <= 1.5 s at the default ``flush_interval=1.0``, <= 0.3 s at 0.1.
Usage::

    python benchmarks/monitor_latency.py [--duration 20] [--rate 50] [--flush 1.0 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

TRAINER = r"""
import sys, time
sys.modules["torch"] = None  # plain scalars: no torch import in the training process
import tuidiag
run_dir, flush, rate, duration = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rec = tuidiag.Recorder(run_dir, flush_interval=flush)
t0 = time.time()
k = 0
while time.time() - t0 < duration:
    rec.step(1000.0 + k)
    k += 1
    delay = t0 + k / rate - time.time()
    if delay > 0:
        time.sleep(delay)
rec.close()
print(k)
"""


def start_trainer(run_dir: Path, flush: float, rate: float, duration: float) -> subprocess.Popen:
    import tuidiag

    env = dict(os.environ)
    source = str(Path(tuidiag.__file__).resolve().parent.parent)  # the same tuidiag as this process
    env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-c", TRAINER, str(run_dir), str(flush), str(rate), str(duration)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class ModelPath:
    """RunWatcher + RunsModel, no UI: refresh on every watcher callback, on a thread."""

    def __init__(self, root: Path) -> None:
        from tuidiag.viewmodel.model import RunsModel
        from tuidiag.viewmodel.watcher import RunWatcher

        self.model = RunsModel(root)
        self.seen: list[tuple[float, int]] = []
        self._wake = threading.Event()
        self._stop = False
        self._dirs: set[Path] = set()
        self._lock = threading.Lock()
        self.watcher = RunWatcher(root, self._on_change)
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _on_change(self, dirs: set[Path]) -> None:
        with self._lock:
            self._dirs |= dirs
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop:
            self._wake.wait(0.5)
            self._wake.clear()
            with self._lock:
                dirs, self._dirs = self._dirs, set()
            if not dirs:
                continue
            new = self.model.discover()
            summaries = self.model.refresh(None if new else dirs)
            steps = [s.step for s in summaries if s.step is not None]
            if steps:
                self.seen.append((time.time(), max(steps)))

    def start(self) -> None:
        self.thread.start()
        assert self.watcher.start(), self.watcher.error

    def stop(self) -> None:
        self._stop = True
        self._wake.set()
        self.watcher.stop()
        self.thread.join(5)


def app_class():
    from tuidiag.app.app import TuidiagApp

    class TimedApp(TuidiagApp):
        """The real app; notes when each refresh's summaries reached ``app.summaries``."""

        seen: list[tuple[float, int]]

        def on_tuidiag_app_runs_refreshed(self, message) -> None:
            super().on_tuidiag_app_runs_refreshed(message)
            steps = [s.step for s in self.summaries if s.step is not None]
            if steps:
                self.seen.append((time.time(), max(steps)))

    return TimedApp


def latencies(seen: list[tuple[float, int]], walls: np.ndarray, warmup: int) -> np.ndarray:
    """For each step k >= warmup: first time seen with step >= k, minus the step's wall time."""
    if not seen:
        return np.empty(0)
    times = np.array([t for t, _ in seen])
    best = np.maximum.accumulate(np.array([s for _, s in seen]))
    steps = np.arange(warmup, len(walls))
    idx = np.searchsorted(best, steps, side="left")  # first refresh whose newest step >= k
    ok = idx < len(times)
    return times[idx[ok]] - walls[steps[ok]]


async def measure(flush: float, rate: float, duration: float) -> dict:
    import tuidiag

    root = Path(tempfile.mkdtemp(prefix="tuidiag-latency-"))
    TimedApp = app_class()
    app = TimedApp(root)
    app.seen = []
    model_path = ModelPath(root)
    model_path.start()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        assert app.watching, "the app is not watching files (polling): latency would be the poll interval"
        trainer = start_trainer(root / "run", flush, rate, duration)
        while trainer.poll() is None:
            await asyncio.sleep(0.1)
        await pilot.pause(max(2.0, 3 * flush))
    model_path.stop()
    out, err = trainer.communicate()
    if trainer.returncode != 0:
        raise RuntimeError(err)
    loss = tuidiag.open_run(root / "run").series("train/loss")
    assert np.array_equal(loss.values, 1000.0 + loss.steps), "loss values do not match the known sequence"
    walls = loss.wall_times
    warmup = int(rate * 2)  # the first 2 s include the run's discovery
    result = {"steps": len(walls)}
    for name, seen in (("app", app.seen), ("model", model_path.seen)):
        lat = latencies(seen, walls, warmup)
        result[name] = lat
        result[name + "_refreshes"] = len(seen)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds each training runs")
    parser.add_argument("--rate", type=float, default=50.0, help="training steps per second")
    parser.add_argument("--flush", type=float, nargs="+", default=[1.0, 0.1], help="flush intervals to try")
    parser.add_argument("--src", type=Path, help="another checkout (the dir holding tuidiag/) measured the same way afterwards")
    args = parser.parse_args()
    import tuidiag

    print(f"== tuidiag from {Path(tuidiag.__file__).parent} ==")
    targets = {1.0: 1.5, 0.1: 0.3}
    print(f"training process: rec.step() at {args.rate:g} steps/s for {args.duration:g} s per flush interval; cpus={os.cpu_count()}")
    print("baseline: TensorBoard SummaryWriter default flush_secs=120 -> median ~60 s, p95 ~114 s "
          "(documented default, not measured; plus TensorBoard's 5 s reload)")
    print(f"{'flush_interval':>14} {'path':>6} {'steps':>6} {'refreshes':>9} {'p50 s':>7} {'p95 s':>7} {'max s':>7}  "
          f"{'p50/flush':>9}  {'vs TB median':>12}  target")
    for flush in args.flush:
        r = asyncio.run(measure(flush, args.rate, args.duration))
        for name in ("app", "model"):
            lat = r[name]
            if not len(lat):
                print(f"{flush:>14g} {name:>6}  no step became visible")
                continue
            p50, p95, mx = np.percentile(lat, 50), np.percentile(lat, 95), lat.max()
            target = targets.get(flush)
            verdict = "" if target is None else f"p95 <= {target:g} s: {'OK' if p95 <= target else 'MISSED'}"
            print(f"{flush:>14g} {name:>6} {len(lat):>6} {r[name + '_refreshes']:>9} {p50:>7.3f} {p95:>7.3f} {mx:>7.3f}  "
                  f"{p50 / flush:>8.2f}x  {60.0 / p50:>11.0f}x  {verdict}")
    if args.src:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(args.src.resolve()), env.get("PYTHONPATH", "")])
        argv = [sys.executable, str(Path(__file__).resolve()), "--duration", str(args.duration), "--rate", str(args.rate),
                "--flush", *map(str, args.flush)]
        print()
        sys.stdout.flush()
        subprocess.run(argv, env=env, cwd=str(args.src), check=True)


if __name__ == "__main__":
    main()
