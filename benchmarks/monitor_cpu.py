"""CPU used by the monitor app while it watches 10 live runs.

Ten training processes (plain ``rec.step`` + ``rec.log`` of 16 scalars, no torch,
``--rate`` steps/s, ``flush_interval=1.0``; each first writes ``--history`` steps
at once, so the runs are not trivially short) write under one root. A headless
``TuidiagApp`` runs in its own process (``app.run_test``); after a warm-up it
measures its own CPU time (``os.times``: user + system, all threads) over a
window and divides by the wall time: % of one core. Target: <= 5 %.

Three app processes are measured in turn:

- ``baseline``: the app on an empty root (textual's own timers: the floor);
- ``overview``: the app on the root with the 10 live runs, overview shown;
- ``run view``: the same with one run's view open (charts, layer grid, diagnosis).

For each: CPU %, ratio to the baseline, refreshes handled per second, the CPU of
the main (UI) thread and of each thread by name (the diagnosis thread, the readers, the
file watcher's), and the CPU time spent inside ``RunsModel`` (discover /
refresh / detail, on worker threads); the rest is the file watcher and Textual's
worker/message machinery.

Usage::

    python benchmarks/monitor_cpu.py [--window 40] [--runs 10] [--rate 20] [--history 20000]
    python benchmarks/monitor_cpu.py --src /tmp/before   # time another copy of tuidiag too
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()

TRAINER = r"""
import math, random, sys, time
sys.modules["torch"] = None  # plain scalars: no torch in the training processes
import tuidiag
run_dir, rate, duration, history, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
names = ["lr/group0", "grad_norm/total"] + [f"grad_norm/layer{i}.weight" for i in range(7)] + [f"update_ratio/layer{i}.weight" for i in range(7)]
rec = tuidiag.Recorder(run_dir, flush_interval=1.0, max_queue=4 * history + 10_000)
def one(k):
    loss = 2.0 * math.exp(-k / 20000) + 0.1 + 0.05 * rng.random()
    rec.step(loss)
    rec.log({n: 1e-3 if n.startswith("lr") else rng.lognormvariate(-1, 0.3) for n in names})
    if k % 100 == 0:
        rec.log({"val/loss": loss + 0.05})
for k in range(history):
    one(k)
rec.flush(60)
print("ready", flush=True)
t0 = time.time()
k = history
while time.time() - t0 < duration:
    one(k)
    k += 1
    delay = t0 + (k - history) / rate - time.time()
    if delay > 0:
        time.sleep(delay)
rec.close()
"""

APP = r"""
import asyncio, json, os, sys, threading, time
from pathlib import Path
root, mode, warmup, window = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.viewmodel import model as model_module

work = {"refresh": 0.0, "detail": 0.0, "discover": 0.0}
calls = {"refresh": 0, "detail": 0, "discover": 0}
lock = threading.Lock()
def wrap(name):
    orig = getattr(model_module.RunsModel, name)
    def timed(self, *a, **k):
        t = time.thread_time()
        try:
            return orig(self, *a, **k)
        finally:
            with lock:
                work[name] += time.thread_time() - t
                calls[name] += 1
    setattr(model_module.RunsModel, name, timed)
for name in work:
    wrap(name)

def main_thread_cpu():
    # CPU seconds of the main thread (the UI: textual's loop and every handler)
    try:
        with open(f"/proc/self/task/{os.getpid()}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return float("nan")

def threads_cpu():
    # CPU seconds of each live thread of this process, summed by Python thread name (numbers dropped)
    out = {}
    names = {t.native_id: t.name for t in threading.enumerate()}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                name, rest = f.read().rsplit(")", 1)
            fields = rest.split()
        except OSError:
            continue
        label = "main (UI)" if tid == str(os.getpid()) else names.get(int(tid), name.split("(", 1)[1]).split(" ")[0].rstrip("0123456789-_")
        out[label] = out.get(label, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out

class CountingApp(TuidiagApp):
    refreshed = 0
    def on_tuidiag_app_runs_refreshed(self, message):
        # no super(): Textual calls the handler of every class in the MRO, TuidiagApp's after this one
        CountingApp.refreshed += 1

async def go():
    app = CountingApp(root)
    async with app.run_test(size=(160, 50)) as pilot:
        t_start = time.perf_counter()
        while mode != "empty" and not app.summaries and time.perf_counter() - t_start < 120:
            await asyncio.sleep(0.1)  # the first full read of every run
        if mode == "run":
            keys = sorted(s.key for s in app.summaries)
            app.post_message(OverviewScreen.RunChosen(keys[0]))
        await asyncio.sleep(warmup)
        with lock:
            w0, c0 = dict(work), dict(calls)
        r0, t0, wall0, ui0, th0 = CountingApp.refreshed, os.times(), time.perf_counter(), main_thread_cpu(), threads_cpu()
        await asyncio.sleep(window)
        t1, wall1, ui1, th1 = os.times(), time.perf_counter(), main_thread_cpu(), threads_cpu()
        with lock:
            w1, c1 = dict(work), dict(calls)
        cpu = (t1.user - t0.user) + (t1.system - t0.system)
        print(json.dumps({
            "cpu_pct": 100 * cpu / (wall1 - wall0), "wall": wall1 - wall0, "cpu": cpu, "ui_pct": 100 * (ui1 - ui0) / (wall1 - wall0),
            "refreshes": CountingApp.refreshed - r0, "runs": len(app.summaries), "watching": app.watching,
            "screen": type(app.screen).__name__, "first_refresh": time.perf_counter() - t_start,
            "work": {k: w1[k] - w0[k] for k in work}, "calls": {k: c1[k] - c0[k] for k in calls},
            "threads": {k: 100 * (v - th0.get(k, 0.0)) / (wall1 - wall0) for k, v in th1.items() if v - th0.get(k, 0.0) > 0},
        }))

asyncio.run(go())
"""


def env_for(src: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    return env


def run_app(root: Path, mode: str, warmup: float, window: float, src: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", APP, str(root), mode, str(warmup), str(window)], env=env_for(src), cwd=str(src),
                          capture_output=True, text=True, timeout=warmup + window + 120)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(label: str, r: dict, base: float | None) -> None:
    ratio = f"{r['cpu_pct'] / base:6.1f}x" if base else "     -"
    w, c = r["work"], r["calls"]
    model = sum(w.values())
    verdict = "" if label == "baseline" else f"  target <= 5%: {'OK' if r['cpu_pct'] <= 5 else 'MISSED'}"
    print(f"{label:<10} {r['cpu_pct']:6.2f}% of a core  {ratio} baseline   refreshes {r['refreshes'] / r['wall']:4.2f}/s   "
          f"UI thread {r['ui_pct']:5.2f}%  model {100 * model / r['wall']:5.2f}% (refresh {c['refresh']}x {1e3 * w['refresh'] / max(1, c['refresh']):.1f} ms, "
          f"detail {c['detail']}x {1e3 * w['detail'] / max(1, c['detail']):.1f} ms, discover {c['discover']}x)  "
          f"runs={r['runs']} screen={r['screen']}{verdict}")
    if r.get("threads"):  # threads that ended inside the window are not counted here (the total above is exact)
        print(" " * 11 + "by thread (% of a core): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["threads"].items(), key=lambda kv: -kv[1])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--window", type=float, default=40.0, help="seconds of CPU measurement per live scenario")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rate", type=float, default=20.0, help="steps/s of each training")
    parser.add_argument("--history", type=int, default=20_000, help="steps each run writes at once before going live")
    parser.add_argument("--src", type=Path, help="another checkout (the dir holding tuidiag/) measured the same way")
    args = parser.parse_args()
    repo = HERE.parent.parent
    sources = [("current", repo)] + ([(f"--src {args.src}", args.src.resolve())] if args.src else [])
    n_live = 2 * (args.warmup + args.window + 40) * len(sources) + 20  # each app start (import, first read) takes ~15-30 s on a loaded machine
    print(f"{args.runs} trainings x {args.rate:g} steps/s x 18 scalars/step, flush_interval=1.0, {args.history:,} steps of history each; "
          f"window {args.window:g} s; cpus={os.cpu_count()}")
    empty = Path(tempfile.mkdtemp(prefix="tuidiag-cpu-empty-"))
    root = Path(tempfile.mkdtemp(prefix="tuidiag-cpu-"))
    trainers = []
    try:
        bases = {label: run_app(empty, "empty", args.warmup, min(args.window, 15.0), src) for label, src in sources}
        for i in range(args.runs):
            trainers.append(subprocess.Popen(
                [sys.executable, "-c", TRAINER, str(root / f"run{i:02d}"), str(args.rate), str(n_live), str(args.history), str(i)],
                env=env_for(repo), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for t in trainers:
            line = t.stdout.readline()
            if "ready" not in line:
                raise RuntimeError(f"trainer failed: {t.stderr.read()[-2000:]}")
        for label, src in sources:
            print(f"\n== {label} tuidiag ==")
            report("baseline", bases[label], None)
            for mode, name in (("overview", "overview"), ("run", "run view")):
                report(name, run_app(root, mode, args.warmup, args.window, src), bases[label]["cpu_pct"])
    finally:
        for t in trainers:
            t.terminate()
        for t in trainers:
            t.wait(10)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)


if __name__ == "__main__":
    main()
