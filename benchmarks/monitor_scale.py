"""Monitor at scale: one run of 1,000,000 steps x 20 metrics, and 50 runs of 10k steps.

Data is written once (cached under ``--data``, default ``/tmp/tuidiag-bench``) with
Arrow tables matching ``tuidiag.format.METRICS_SCHEMA``: rows in flush order (20
steps per flush, 20 steps/s), compacted into a few large shards the way a finished
run ends up (``r0-<first>-<last>.parquet``), plus an events shard and a ``run.json``
with a model summary, so that every diagnosis rule has something to chew on.

Every measurement runs in a fresh subprocess, so that timings include no warm
cache of an earlier phase and the peak RSS (``ru_maxrss``) is that phase's alone:

- ``raw``: the floor any reader pays - ``pyarrow.parquet.read_table`` of every
  shard plus ``to_numpy`` of step/value/wall_time (the baseline the ratios use);
- ``open``: ``tuidiag.open_run``;
- ``model``: ``RunsModel.discover`` + ``refresh`` + ``detail`` (the data of the
  first full frame of the run view);
- ``app``: a headless ``TuidiagApp`` pointed at the run, from construction until
  the run view has drawn its first full frame (targets: < 1 s, peak RSS < 300 MB);
- ``many``: 50 runs under one root: first full overview refresh, a refresh with
  nothing new, a refresh after one run grew, and ``diagnose`` per run.

Usage::

    python benchmarks/monitor_scale.py [--steps 1000000] [--runs 50] [--run-steps 10000]
    python benchmarks/monitor_scale.py --src /tmp/before   # also time another copy of tuidiag
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent

PARAMS = ["0.weight", "0.bias", "3.weight", "3.bias", "6.weight", "6.bias", "9.weight", "9.bias"]
METRICS = [
    "train/loss", "lr/group0", "grad_norm/total",
    *[f"grad_norm/{p}" for p in PARAMS],
    *[f"update_ratio/{p}" for p in PARAMS if p.endswith("weight")],
    "time/step", "time/data_wait", "time/compute", "grad/clipped", "model/training",
]
assert len(METRICS) == 20
STEPS_PER_FLUSH = 20
STEPS_PER_S = 20.0


# ---- data ------------------------------------------------------------------------
def _values(steps, total: int, rng):
    """A (len(steps), 20) matrix of plausible values, one column per metric."""
    import numpy as np

    n = len(steps)
    t = steps / max(total, 1)
    cols = {
        "train/loss": 2.0 * np.exp(-5 * t) + 0.1 + 0.05 * rng.standard_normal(n),
        "lr/group0": 1e-3 * 0.5 * (1 + np.cos(np.pi * t)),
        "grad_norm/total": np.exp(0.3 * rng.standard_normal(n)) * (1.0 - 0.5 * t),
        "time/step": 0.05 + 0.002 * rng.standard_normal(n),
        "time/data_wait": 0.005 + 0.0005 * rng.standard_normal(n),
        "time/compute": 0.045 + 0.002 * rng.standard_normal(n),
        "grad/clipped": np.zeros(n),
        "model/training": np.ones(n),
    }
    out = np.empty((n, len(METRICS)))
    for i, name in enumerate(METRICS):
        if name in cols:
            out[:, i] = cols[name]
        elif name.startswith("grad_norm/"):
            out[:, i] = np.exp(0.3 * rng.standard_normal(n)) * 0.3
        else:
            out[:, i] = 1e-3 * np.exp(0.2 * rng.standard_normal(n))
    return out


def write_run(path: Path, steps: int, steps_per_shard: int, seed: int = 0, start: float = 1.7e9, summaries: bool = True) -> None:
    """Write a finished run of ``steps`` steps x 20 metrics, in shards of ``steps_per_shard`` steps.

    ``summaries``: as the recorder leaves a run (a summary file beside each compacted shard and the
    summary of the newest rows in ``run.json``); without, as a writer before them did."""
    import numpy as np
    import pyarrow as pa

    from tuidiag.format import EVENTS_DIR, EVENTS_SCHEMA, METRICS_DIR, METRICS_SCHEMA, ShardName
    from tuidiag.store.manifest import new_manifest, write_manifest
    from tuidiag.store.shards import write_table_atomic

    keeper = None
    if summaries:
        from tuidiag.store.summary_files import write_summary
        from tuidiag.store.tail_summary import TailKeeper

        keeper = TailKeeper()

    rng = np.random.default_rng(seed)
    (path / METRICS_DIR).mkdir(parents=True, exist_ok=True)
    (path / EVENTS_DIR).mkdir(parents=True, exist_ok=True)
    dictionary = pa.array(METRICS, pa.string())
    codes_row = np.arange(len(METRICS), dtype=np.int32)
    m = len(METRICS)
    for s0 in range(0, steps, steps_per_shard):
        s1 = min(steps, s0 + steps_per_shard)
        st = np.arange(s0, s1, dtype=np.int64)
        vals = _values(st, steps, rng)
        walls = start + st / STEPS_PER_S
        seq = st // STEPS_PER_FLUSH
        n = len(st) * m
        table = pa.Table.from_arrays(
            [
                pa.array(np.repeat(st, m)),
                pa.array(np.repeat(walls, m)),
                pa.DictionaryArray.from_arrays(pa.array(np.tile(codes_row, len(st))), dictionary),
                pa.array(vals.reshape(-1)),
                pa.array(np.zeros(n, np.int32)),
                pa.array(np.repeat(seq, m)),
            ],
            schema=METRICS_SCHEMA,
        )
        name = ShardName(0, int(seq[0]), int(seq[-1]))
        if keeper is not None:
            write_summary(path, name.filename, table)
            keeper.add((np.repeat(st, m), np.repeat(walls, m), np.tile(codes_row, len(st)), vals.reshape(-1)),
                       {n: i for i, n in enumerate(METRICS)}, int(seq[-1]))
        write_table_atomic(path / METRICS_DIR / name.filename, table)
    ev_steps = [steps // 3, 2 * steps // 3]
    ev = pa.Table.from_arrays(
        [
            pa.array(ev_steps, pa.int64()),
            pa.array([start + s / STEPS_PER_S for s in ev_steps]),
            pa.array(["grad_clipped"] * 2).dictionary_encode(),
            pa.array(["info"] * 2).dictionary_encode(),
            pa.array(["gradient clipped"] * 2),
            pa.array(["{}"] * 2),
            pa.array(np.zeros(2, np.int32)),
            pa.array([s // STEPS_PER_FLUSH for s in ev_steps], pa.int64()),
        ],
        schema=EVENTS_SCHEMA,
    )
    write_table_atomic(path / EVENTS_DIR / ShardName(0, ev_steps[0] // STEPS_PER_FLUSH, ev_steps[1] // STEPS_PER_FLUSH).filename, ev)
    manifest = new_manifest(path.name, {"lr": 1e-3, "optimizer": "AdamW", "batch_size": 64}, 1, 1.0)
    shapes = {"0": [256, 32], "3": [256, 256], "6": [256, 256], "9": [10, 256]}
    manifest["model"] = {
        "class": "Sequential",
        "params": [{"name": p, "shape": shapes[p.split(".")[0]] if p.endswith("weight") else [shapes[p.split(".")[0]][0]],
                    "numel": 1, "trainable": True} for p in PARAMS],
        "n_params": 150_000, "n_trainable": 150_000, "weight_layers": 4, "has_norm": False,
        "has_dropout": False, "activations": ["ReLU"], "module_kinds": {"Linear": 4, "ReLU": 3},
    }
    end = start + steps / STEPS_PER_S
    manifest.update(status="finished", created=start, heartbeat=end, ended=end, last_step=steps - 1,
                    stats={"rows_written": steps * m, "dropped_rows": 0, "errors": 0})
    if keeper is not None:
        manifest["summary"] = keeper.to_json()
    write_manifest(path, manifest)
    if keeper is not None:  # and the whole-run file the recorder writes when it closes
        from tuidiag.store.whole_writer import write_whole

        write_whole(path, 0)


def ensure_whole(path: Path) -> None:
    """A run cached by an earlier version of :func:`write_run` gets the whole-run file the recorder now writes at
    close (as ``tuidiag compact`` would give it); a checkout without that file format (``--src``) ignores it."""
    try:
        from tuidiag.store.whole_writer import write_whole
        from tuidiag.store.whole_summary import whole_path
    except ImportError:
        return
    if (path / "summaries").is_dir() and not whole_path(path, 0).exists():
        write_whole(path, 0)


def ensure_data(data: Path, steps: int, runs: int, run_steps: int) -> tuple[Path, Path]:
    big = data / f"big-{steps}-v2" / "run"  # v2: with summaries, as the recorder now leaves a run
    many = data / f"many-{runs}x{run_steps}-v2"
    if not (big / "run.json").exists():
        t = time.perf_counter()
        write_run(big, steps, steps_per_shard=50_000)
        print(f"(wrote {big}: {steps:,} steps x {len(METRICS)} metrics in {time.perf_counter() - t:.1f} s)")
    ensure_whole(big)
    if not (many / "done").exists():
        t = time.perf_counter()
        for i in range(runs):
            write_run(many / f"run{i:02d}", run_steps, steps_per_shard=run_steps // 2 or 1, seed=i + 1)
        (many / "done").write_text("ok")
        print(f"(wrote {runs} runs of {run_steps:,} steps under {many} in {time.perf_counter() - t:.1f} s)")
    return big, many


def many_runs(data: Path, runs: int, run_steps: int) -> Path:
    """``runs`` small runs of ``run_steps`` steps under ``data`` (written once; a ``done`` file marks them whole),
    the overview's load in ``scale.py`` and ``screen_cost.py``."""
    root = data / f"many-{runs}x{run_steps}"
    if not (root / "done").exists():
        for i in range(runs):
            write_run(root / f"run{i:03d}", run_steps, steps_per_shard=max(1, run_steps // 2), seed=i + 1)
        (root / "done").write_text("ok")
    return root


# ---- measurements (each in a fresh process) -------------------------------------
def _rss_mb() -> float:
    """Peak resident memory of this process so far, MB (VmHWM: unlike ``ru_maxrss`` it is
    reset by exec, so it never reports the parent's peak)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_raw(path: Path) -> dict:
    import pyarrow.parquet as pq

    base = _rss_mb()
    t, c = time.perf_counter(), time.process_time()
    arrays = []
    for f in sorted((path / "metrics").glob("r*.parquet")):
        table = pq.read_table(f)
        arrays.append([table.column(c).to_numpy() for c in ("step", "value", "wall_time")])
    return {"read": time.perf_counter() - t, "cpu": time.process_time() - c, "rss": _rss_mb(), "rss_imports": base}


def phase_open(path: Path) -> dict:
    import tuidiag

    base = _rss_mb()
    t = time.perf_counter()
    run = tuidiag.open_run(path)
    t_open = time.perf_counter() - t
    t = time.perf_counter()
    loss = run.series("train/loss")
    for name in run.metric_names:
        run.series(name)
    t_series = time.perf_counter() - t
    return {"open": t_open, "series": t_series, "rows": run.rows_read, "loss_len": len(loss), "rss": _rss_mb(), "rss_imports": base}


def phase_model(path: Path) -> dict:
    from tuidiag.viewmodel.model import RunsModel

    base = _rss_mb()
    model = RunsModel(path)
    t0 = time.perf_counter()
    model.discover()
    t1 = time.perf_counter()
    summaries = model.refresh(None)
    t2 = time.perf_counter()
    detail = model.detail(summaries[0].key)
    t3 = time.perf_counter()
    model.refresh(None)
    detail = model.detail(summaries[0].key)
    t4 = time.perf_counter()
    return {"discover": t1 - t0, "refresh": t2 - t1, "detail": t3 - t2, "total": t3 - t0, "again": t4 - t3,
            "health": summaries[0].health, "findings": [f.code for f in detail.diagnosis.findings],
            "rss": _rss_mb(), "rss_imports": base}



def record_frames(clock: Callable[[], float]) -> list[tuple[float, float]]:
    """Patch Textual's screen refresh so each frame drawn appends (wall time, ``clock()``) to the list returned."""
    from textual.screen import Screen

    frames: list[tuple[float, float]] = []
    refresh = Screen._compositor_refresh

    def timed_refresh(screen: Screen) -> None:
        refresh(screen)
        frames.append((time.perf_counter(), clock()))

    Screen._compositor_refresh = timed_refresh  # type: ignore[method-assign]
    return frames

def phase_app(path: Path) -> dict:
    """The app until the run view's first full frame: ``first_frame`` when the test pilot finds it idle after the
    view got its data (its idle check sleeps in 20 ms slices), ``frame_rendered`` when the screen's compositor
    finished the last frame before that (a hook on ``Screen._compositor_refresh``), ``cpu`` the process's CPU
    (all threads) until then."""
    import asyncio

    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.run_screen import RunScreen

    base = _rss_mb()
    out: dict = {}
    frames = record_frames(time.process_time)

    async def go() -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        app = TuidiagApp(path)
        async with app.run_test(size=(160, 48)) as pilot:
            while not (isinstance(app.screen, RunScreen) and app.screen.detail is not None):
                await asyncio.sleep(0.005)
                if time.perf_counter() - t0 > 120:
                    raise TimeoutError("run view never drew")
            out["detail_shown"] = time.perf_counter() - t0
            await pilot.pause()  # let the compositor draw the frame
            out["first_frame"] = time.perf_counter() - t0
            end, cpu = frames[-1] if frames else (time.perf_counter(), time.process_time())
            out.update(frame_rendered=end - t0, cpu=cpu - c0)
            out["title"] = str(app.screen.query_one("#run-title").render())[:80]

    asyncio.run(go())
    out.update(rss=_rss_mb(), rss_imports=base)
    return out


def phase_many(root: Path) -> dict:
    import numpy as np

    from tuidiag.diagnosis import diagnose
    from tuidiag.format import METRICS_DIR, METRICS_SCHEMA, ShardName
    from tuidiag.viewmodel.model import RunsModel
    from tuidiag.store.shards import list_shards, write_table_atomic

    base = _rss_mb()
    model = RunsModel(root)
    t0 = time.perf_counter()
    model.discover()
    t1 = time.perf_counter()
    summaries = model.refresh(None)
    t2 = time.perf_counter()
    idle = []
    for _ in range(5):
        t = time.perf_counter()
        model.refresh(None)
        idle.append(time.perf_counter() - t)
    # one run grows by one flush: the app refreshes only that run's directory
    first = min(summaries, key=lambda s: s.key)
    run_dir = Path(first.key)
    import pyarrow as pa
    shards = list_shards(run_dir / METRICS_DIR)
    last = max(s.last for s, _ in shards)
    step0 = first.step + 1
    st = np.arange(step0, step0 + STEPS_PER_FLUSH, dtype=np.int64)
    m = len(METRICS)
    table = pa.Table.from_arrays(
        [pa.array(np.repeat(st, m)), pa.array(np.repeat(time.time() + st * 0, m)),
         pa.DictionaryArray.from_arrays(pa.array(np.tile(np.arange(m, dtype=np.int32), len(st))), pa.array(METRICS)),
         pa.array(np.ones(len(st) * m)), pa.array(np.zeros(len(st) * m, np.int32)), pa.array(np.full(len(st) * m, last + 1))],
        schema=METRICS_SCHEMA)
    extra = run_dir / METRICS_DIR / ShardName(0, last + 1, last + 1).filename
    write_table_atomic(extra, table)
    try:
        t = time.perf_counter()
        model.refresh({run_dir})
        grew = time.perf_counter() - t
    finally:
        extra.unlink()
    from tuidiag.store import open_run

    diag = []
    for summary in summaries[:20]:
        run = open_run(summary.key)
        t = time.perf_counter()
        diagnose(run)
        diag.append(time.perf_counter() - t)
    key = summaries[0].key
    t = time.perf_counter()
    model.detail(key)
    t_detail = time.perf_counter() - t
    return {"runs": len(summaries), "discover": t1 - t0, "first_refresh": t2 - t1, "idle_refresh": statistics.median(idle),
            "grew_refresh": grew, "diagnose_median": statistics.median(diag), "diagnose_max": max(diag),
            "detail": t_detail, "rss": _rss_mb(), "rss_imports": base}


PHASES = {"raw": phase_raw, "open": phase_open, "model": phase_model, "app": phase_app, "many": phase_many}


def measure(phase: str, path: Path, src: Path | None = None) -> dict:
    import tempfile

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src or REPO), env.get("PYTHONPATH", "")])
    env["TUIDIAG_CACHE_DIR"] = tempfile.mkdtemp(prefix="tuidiag-bench-cache-")  # cold: nothing computed by an earlier phase
    proc = subprocess.run([sys.executable, str(HERE), "--phase", phase, str(path)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=str(src or REPO))
    if proc.returncode != 0:
        raise RuntimeError(f"phase {phase} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best_of(phase: str, path: Path, repeat: int, src: Path | None = None, key: str = "") -> dict:
    """Run a phase ``repeat`` times; keep the result with the smallest ``key`` (timing noise)."""
    results = [measure(phase, path, src) for _ in range(repeat)]
    return min(results, key=lambda r: r[key]) if key else results[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--run-steps", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=Path("/tmp/tuidiag-bench"))
    parser.add_argument("--repeat", type=int, default=2, help="fresh processes per phase; the fastest is kept")
    parser.add_argument("--src", type=Path, help="another checkout (its dir holding tuidiag/) to time the same way, e.g. before a change")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        import tuidiag

        result = PHASES[args.phase](args.path)
        result["tuidiag_file"] = tuidiag.__file__
        print(json.dumps(result))
        return

    big, many = ensure_data(args.data, args.steps, args.runs, args.run_steps)
    size = sum(f.stat().st_size for f in (big / "metrics").iterdir()) / 2**20
    nshards = len(list((big / "metrics").iterdir()))
    print(f"big run: {args.steps:,} steps x {len(METRICS)} metrics = {args.steps * len(METRICS) / 1e6:.0f}M rows, "
          f"{nshards} shards, {size:.0f} MiB   cpus={os.cpu_count()}")
    sources = [("current", None)] + ([("--src", args.src)] if args.src else [])
    raw = best_of("raw", big, args.repeat, key="read")
    print(f"\nbaseline (raw pyarrow read_table + to_numpy of all shards): {raw['read']:.3f} s, peak RSS {raw['rss']:.0f} MB "
          f"(after imports {raw['rss_imports']:.0f} MB)")
    for label, src in sources:
        o = best_of("open", big, args.repeat, src, "open")
        print(f"\n== {label}: {Path(o['tuidiag_file']).parent} ==")
        print(f"open_run                     {o['open']:7.3f} s  ({o['open'] / raw['read']:.2f}x raw)  "
              f"all series {o['series']:.3f} s   peak RSS {o['rss']:.0f} MB  (target: -)")
        mo = best_of("model", big, args.repeat, src, "total")
        print(f"RunsModel discover           {mo['discover']:7.3f} s")
        print(f"          refresh            {mo['refresh']:7.3f} s  (summaries + live diagnosis)")
        print(f"          detail             {mo['detail']:7.3f} s  (charts, layer grid, events)")
        print(f"          first frame data   {mo['total']:7.3f} s  ({mo['total'] / raw['read']:.2f}x raw)   peak RSS {mo['rss']:.0f} MB")
        print(f"          refresh+detail again, nothing new: {mo['again']:.3f} s   health={mo['health']} findings={mo['findings']}")
        a = best_of("app", big, args.repeat, src, "first_frame")
        ok = "OK" if a["first_frame"] < 1 else "MISSED"
        okm = "OK" if a["rss"] < 300 else "MISSED"
        print(f"app first full frame         {a['first_frame']:7.3f} s  (target < 1 s: {ok})   "
              f"peak RSS {a['rss']:.0f} MB (target < 300 MB: {okm}; {a['rss_imports']:.0f} MB after imports)")
        mm = best_of("many", many, args.repeat, src, "first_refresh")
        print(f"{mm['runs']} runs x {args.run_steps:,} steps: discover {mm['discover']:.3f} s, first full refresh {mm['first_refresh']:.3f} s, "
              f"refresh with nothing new {mm['idle_refresh'] * 1e3:.1f} ms, after one run grew {mm['grew_refresh'] * 1e3:.1f} ms")
        print(f"          diagnose per run: median {mm['diagnose_median'] * 1e3:.1f} ms, max {mm['diagnose_max'] * 1e3:.1f} ms;  "
              f"detail {mm['detail'] * 1e3:.1f} ms;  peak RSS {mm['rss']:.0f} MB")


if __name__ == "__main__":
    main()
