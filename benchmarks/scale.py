"""Scale: a 10-million-row run, 100,000 small shards compacted under a tailing reader,
200 runs under one root, and the monitor's memory and frame time on the big run.

Reuses the data writer and the measured phases of ``monitor_scale.py`` (each phase in
a fresh process, peak RSS from ``VmHWM``). Data is written once under ``--data``.

- ``10M rows``: ``open_run`` time and peak RSS, against raw ``pyarrow`` reading; the
  monitor's first full frame of the run view and its peak RSS; the time to redraw
  after a key (tab switch) once loaded: the frame time a user feels.
- memory per row: the reader keeps every row as numpy columns, so the monitor's
  memory grows with the rows it shows; the bound is printed as MB after imports plus
  bytes per row, from the 10M-row run and one of a tenth of its size.
- ``100,000 shards``: a ``ShardWriter`` flushes 100,000 times (one shard per flush,
  compaction as in production: 32 small shards merged), while a reader thread
  tails with ``Run.refresh``; every row must be read exactly once.
- ``200 runs``: the overview's first full refresh, a refresh with nothing new, one
  after a run grew, peak RSS.

Usage::

    python benchmarks/scale.py [--rows 10000000] [--shards 100000] [--runs 200] [--run-steps 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

import monitor_scale as ms  # noqa: E402  (the benchmark next to this one)


def phase_frames(path: Path) -> dict:
    """Open the run view headless; time redraws after key presses (tab switches)."""
    import asyncio

    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.run_screen import RunScreen

    out: dict = {}

    async def go() -> None:
        app = TuidiagApp(path)
        async with app.run_test(size=(160, 48)) as pilot:
            t0 = time.perf_counter()
            while not (isinstance(app.screen, RunScreen) and app.screen.detail is not None):
                await asyncio.sleep(0.01)
                if time.perf_counter() - t0 > 300:
                    raise TimeoutError("run view never drew")
            await pilot.pause()
            times, first = [], {}
            for key in ("2", "3", "4", "5", "6", "1") * 3:
                t = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                times.append(time.perf_counter() - t)
                first.setdefault(key, times[-1])  # the first visit of a tab builds it
            out.update(frame_first_visit=first, frame_revisit_median=sorted(times[6:])[len(times[6:]) // 2],
                       frame_revisit_max=max(times[6:]))

    asyncio.run(go())
    out["rss"] = ms._rss_mb()
    return out


def shard_storm(run_dir: Path, flushes: int) -> dict:
    """``flushes`` one-row flushes through a real ShardWriter while a reader tails; check every row."""
    import numpy as np

    import tuidiag
    from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter

    writer = ShardWriter(run_dir, rank=0, flush_interval=3600)
    layout = Layout(["x"])
    done = threading.Event()
    polls, max_files = [0], [0]

    def tail() -> None:
        run = tuidiag.open_run(run_dir)
        while not done.is_set():
            run.refresh()
            polls[0] += 1
            max_files[0] = max(max_files[0], len(os.listdir(run_dir / "metrics")))
            time.sleep(0.005)  # a monitor polls at most this often; a busy loop would only fight for the GIL
        run.refresh()
        tail.run = run  # type: ignore[attr-defined]

    reader = threading.Thread(target=tail)
    t0 = time.perf_counter()
    reader.start()
    for step in range(flushes):
        writer.submit(MetricBatch(step, float(step), layout, np.array([float(step)])))
        writer.flush()
    writer.close()
    elapsed = time.perf_counter() - t0
    done.set()
    reader.join()
    steps = tail.run.series("x").steps  # type: ignore[attr-defined]
    return {"flushes": flushes, "seconds": elapsed, "polls": polls[0], "max_files": max_files[0],
            "rows_read": int(len(steps)), "unique": int(len(np.unique(steps))),
            "exact": bool(np.array_equal(steps, np.arange(flushes))), "warnings": tail.run.warnings,  # type: ignore[attr-defined]
            "files_at_end": len(os.listdir(run_dir / "metrics"))}


PHASES = {"frames": phase_frames}


def measure(phase: str, path: Path) -> dict:
    """Run ``phase`` of this script (or of monitor_scale) in a fresh process."""
    script = HERE if phase in PHASES else ms.HERE
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ms.REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(script), "--phase", phase, str(path)], env=env,
                          capture_output=True, text=True, timeout=1800, cwd=str(ms.REPO))
    if proc.returncode != 0:
        raise RuntimeError(f"phase {phase} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def big_run(data: Path, rows: int) -> Path:
    """A finished run of ``rows`` rows (20 metrics per step), written once."""
    steps = rows // len(ms.METRICS)
    path = data / f"rows-{rows}" / "run"
    if not (path / "run.json").exists():
        t = time.perf_counter()
        ms.write_run(path, steps, steps_per_shard=50_000)
        print(f"(wrote {rows:,} rows in {time.perf_counter() - t:.0f} s)")
    return path


def report_rows(data: Path, rows: int) -> None:
    small, big = big_run(data, rows // 10), big_run(data, rows)
    size = sum(f.stat().st_size for f in (big / "metrics").iterdir()) / 2**20
    raw = measure("raw", big)
    opened = measure("open", big)
    opened_small = measure("open", small)
    app, app_small = measure("app", big), measure("app", small)
    frames = measure("frames", big)
    print(f"\n== one run of {rows:,} rows ({size:.0f} MiB of Parquet) ==")
    print(f"raw pyarrow read_table + to_numpy      {raw['read']:7.2f} s   peak RSS {raw['rss']:.0f} MB")
    print(f"tuidiag.open_run                       {opened['open']:7.2f} s   ({opened['open'] / raw['read']:.2f}x raw)   "
          f"peak RSS {opened['rss']:.0f} MB ({opened['rss_imports']:.0f} MB after imports)")
    print(f"monitor: first full frame of run view  {app['first_frame']:7.2f} s   peak RSS {app['rss']:.0f} MB")
    visits = ", ".join(f"{k}: {v * 1e3:.0f}" for k, v in frames["frame_first_visit"].items())
    print(f"monitor: redraw after a tab key        first visit of each tab (ms) {visits}; "
          f"revisits median {frames['frame_revisit_median'] * 1e3:.0f} ms, max {frames['frame_revisit_max'] * 1e3:.0f} ms")
    per_row = (app["rss"] - app_small["rss"]) * 2**20 / (rows - rows // 10)
    per_row_open = (opened["rss"] - opened_small["rss"]) * 2**20 / (rows - rows // 10)
    base = app_small["rss"] - per_row * rows // 10 / 2**20
    print(f"memory bound: monitor peak RSS ~ {base:.0f} MB + {per_row:.1f} bytes x rows "
          f"(open_run alone: {per_row_open:.1f} bytes/row); {rows // 10:,} rows: {app_small['rss']:.0f} MB")


def report_storm(data: Path, flushes: int) -> None:
    import shutil

    run_dir = data / f"storm-{flushes}"
    shutil.rmtree(run_dir, ignore_errors=True)
    result = shard_storm(run_dir, flushes)
    skipped = [w for w in result["warnings"] if "run.json" not in w]  # a bare ShardWriter writes no manifest
    ok = "OK" if result["exact"] and not skipped else f"FAILED {skipped[:3]}"
    print(f"\n== {flushes:,} one-row shards, compacted while a reader tails ==")
    print(f"{result['seconds']:.0f} s ({flushes / result['seconds']:.0f} flushes/s); reader polls {result['polls']:,}; "
          f"rows read {result['rows_read']:,}, distinct {result['unique']:,}: every row exactly once: {ok}")
    print(f"most files seen in metrics/ at once: {result['max_files']}; files after close: {result['files_at_end']}")


def report_many(data: Path, runs: int, run_steps: int) -> None:
    root = ms.many_runs(data, runs, run_steps)
    mm = measure("many", root)
    print(f"\n== {mm['runs']} runs x {run_steps:,} steps under one root ==")
    print(f"discover {mm['discover']:.2f} s; first full overview refresh {mm['first_refresh']:.2f} s; "
          f"refresh with nothing new {mm['idle_refresh'] * 1e3:.0f} ms; after one run grew {mm['grew_refresh'] * 1e3:.0f} ms")
    print(f"diagnose per run: median {mm['diagnose_median'] * 1e3:.0f} ms; peak RSS {mm['rss']:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--run-steps", type=int, default=1_000)
    parser.add_argument("--data", type=Path, default=Path("/tmp/tuidiag-scale"))
    parser.add_argument("--only", choices=["rows", "storm", "many"], action="append")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(PHASES[args.phase](args.path)))
        return
    print(f"cpus={os.cpu_count()}")
    parts = args.only or ["rows", "storm", "many"]
    if "rows" in parts:
        report_rows(args.data, args.rows)
    if "many" in parts:
        report_many(args.data, args.runs, args.run_steps)
    if "storm" in parts:
        report_storm(args.data, args.shards)


if __name__ == "__main__":
    main()
