"""Issue 14 in one run: the monitor's cost is set by the screen, not by the run.

Every figure of the issue, each measured in a fresh process (peak RSS from ``VmHWM``)
beside raw pyarrow (``read_table`` + ``to_numpy`` of every shard: the floor any reader
of all rows pays) and, where it applies, TensorBoard's ``EventAccumulator`` on the
same scalars, in the same run:

- first full frame of the run view (``TuidiagApp`` headless, 160x48) and peak RSS, on a
  1M-step x 20-metric run and on a 10M-row run (targets 0.3 s / 0.5 s, 150 MB);
- switching tab (every tab key, the first tab last) once the view is drawn (target 50 ms): the app's own time from the key press to
  the last frame its compositor renders for it, and its CPU, beside the test pilot's press-until-idle; and each
  tab's first visit (its pane composed and drawn then), to the first frame, which shows the tab, and to the
  last (Textual lays the pane out again once its widget's mount completes, a frame tick later);
- the overview of 200 runs first drawn (target 0.5 s: the first frame rendered once every row is read), and
  until every health badge is in;
- CPU of the monitor watching 10 live trainings (20 steps/s, 1 s flush; target 5 %);
- ``tuidiag status`` CPU per call over 20 calls (target 0.15 s), beside the raw pyarrow
  way to get the newest loss (open the newest shard, read its last row group).

Wall and CPU time are printed for each figure, then a table per source: value, target, CPU, the ratio to raw
pyarrow and to TensorBoard measured in this run, PASS or MISS. Load on a shared machine stretches wall times
(the load average is printed); the CPU times and the ratios move much less.

Runs are written once as the recorder now leaves them (compacted shards of 50,000 steps
with their summaries, ``run.json`` with its summary), cached under ``--data``. The
TensorBoard copy of the 1M-step run (one event of 20 scalars per step) takes about a
minute to write the first time. ``--src DIR`` measures another checkout (e.g. the code
before this change) the same way, on the same files. Usage::

    python benchmarks/screen_cost.py [--steps 1000000] [--rows 10000000] [--runs 200] [--src /tmp/before]
                                     [--skip-tb] [--skip-cpu] [--cpu-window 20] [--cpu-warmup 30]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))  # the benchmarks beside it; tuidiag comes from PYTHONPATH (this checkout or --src)

import monitor_scale as ms  # noqa: E402  (its data writer and measured phases)

REPO = ms.REPO
TARGETS = {"frame_1m": 0.3, "frame_10m": 0.5, "rss": 150.0, "tab": 0.05, "overview": 0.5, "cpu": 5.0, "status": 0.15}


# ---- data ------------------------------------------------------------------------
def big_run(data: Path, steps: int) -> Path:
    path = data / f"run-{steps}" / "run"
    if not (path / "run.json").exists():
        t = time.perf_counter()
        ms.write_run(path, steps, steps_per_shard=50_000)
        print(f"(wrote {steps:,} steps x {len(ms.METRICS)} metrics in {time.perf_counter() - t:.0f} s)", flush=True)
    ms.ensure_whole(path)
    return path


def tensorboard_copy(data: Path, run: Path, steps: int) -> Path:
    """The same scalars as TensorBoard event files: one event per step holding the 20 metrics."""
    path = data / f"tb-{steps}"
    done = data / f"tb-{steps}.done"
    if done.exists():
        return path
    import numpy as np
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    import tuidiag

    t = time.perf_counter()
    opened = tuidiag.open_run(run)
    columns = [opened.series(name).values for name in ms.METRICS]
    del opened
    writer = EventFileWriter(str(path), max_queue_size=10_000, flush_secs=600)
    values = np.column_stack(columns)
    for step in range(steps):
        row = values[step]
        writer.add_event(Event(step=step, wall_time=1.7e9 + step / 20,
                               summary=Summary(value=[Summary.Value(tag=tag, simple_value=float(v)) for tag, v in zip(ms.METRICS, row)])))
    writer.close()
    done.write_text(str(time.perf_counter() - t))
    print(f"(wrote the TensorBoard copy in {time.perf_counter() - t:.0f} s)", flush=True)
    return path


# ---- phases (each in a fresh process) ------------------------------------------------
def phase_tb(path: Path) -> dict:
    """EventAccumulator with its default guidance (a 1,000-point reservoir per tag), then every tag's scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t, c = time.perf_counter(), time.process_time()
    acc = EventAccumulator(str(path))
    acc.Reload()
    kept = sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])
    return {"read": time.perf_counter() - t, "cpu": time.process_time() - c, "kept": kept, "rss": ms._rss_mb()}


def phase_overview(root: Path) -> dict:
    """The app on a root of many runs: until every row is read (``rows_ready``), until the compositor has rendered
    the first frame after that, which shows them (``first_drawn``, and the process's CPU then: a hook on
    ``Screen._compositor_refresh``), until the test pilot finds the app idle (``pilot_idle``: the diagnoses
    queued for every run keep it busy), then until every health badge is in."""
    import asyncio


    from tuidiag.app.app import TuidiagApp

    out: dict = {}
    frames = ms.record_frames(time.process_time)

    async def go() -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        app = TuidiagApp(root, poll=True)
        async with app.run_test(size=(160, 48)) as pilot:
            while not (app.summaries and all(s.status != "reading" for s in app.summaries)):
                await asyncio.sleep(0.005)
                if time.perf_counter() - t0 > 300:
                    raise TimeoutError("overview never drew")
            ready = time.perf_counter()
            out["rows_ready"] = ready - t0
            while not (frames and frames[-1][0] > ready) and time.perf_counter() - ready < 60:
                await asyncio.sleep(0.001)
            drawn = next(frame for frame in frames if frame[0] > ready)
            out["first_drawn"], out["cpu"] = drawn[0] - t0, drawn[1] - c0
            await pilot.pause()
            out["pilot_idle"] = time.perf_counter() - t0
            out["runs"] = len(app.summaries)
            while any(s.health == "-" for s in app.summaries) and time.perf_counter() - t0 < 600:
                await asyncio.sleep(0.05)
            out["all_health"] = time.perf_counter() - t0

    asyncio.run(go())
    out["rss"] = ms._rss_mb()
    return out


def phase_empty(root: Path) -> dict:
    """The app on an empty directory until its first paint: Textual's own start, the floor under every frame here."""
    import asyncio

    from tuidiag.app.app import TuidiagApp

    out: dict = {}

    async def go() -> None:
        t0 = time.perf_counter()
        app = TuidiagApp(root)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            out["first_paint"] = time.perf_counter() - t0

    asyncio.run(go())
    out["rss"] = ms._rss_mb()
    return out


def phase_raw_root(root: Path) -> dict:
    """Raw pyarrow over every run under ``root`` (``read_table`` + ``to_numpy`` of each shard)."""
    import pyarrow.parquet as pq

    t = time.perf_counter()
    for shard in sorted(root.glob("*/metrics/*.parquet")):
        table = pq.read_table(shard)
        [table.column(c).to_numpy() for c in ("step", "value", "wall_time")]
    return {"read": time.perf_counter() - t, "rss": ms._rss_mb()}


def phase_tabs(path: Path, viewed: float = 2.0) -> dict:
    """Tab switches once the run view is drawn (animations off, so the time is the work, not the tab underline
    sliding), two ways: through the test pilot (key press until the pilot finds the app idle: its idle check sleeps
    in 20 ms slices, so its wall time is mostly the pilot's), and the app's own time from the key press to the end
    of the last frame the screen's compositor renders for it (a hook on ``Screen._compositor_refresh``), with the
    main thread's CPU over the same span; beside an unbound key (the pilot's floor; the app draws no frame for it).
    A first visit is timed to the frame from which the tabs' area (tab bar and pane) shows what it settles on: frames
    painted after it that change nothing there (Textual lays a new pane out again a tick later) do not count, and a
    pane first drawn for a wrong size would (``tests/test_first_frame.py`` checks there is none). The keys come after
    the view has shown its diagnosis for ``viewed`` seconds: a finished run's view draws the charts of the tabs not
    yet shown once it has been idle a second (:mod:`tuidiag.app.screens.run_charts_ahead`); ``tabs_at_once`` presses
    them after 0.1 s, before that."""
    import asyncio
    import statistics


    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.run_screen import RunScreen

    from textual.screen import Screen

    out: dict = {}
    frames = ms.record_frames(time.thread_time)
    painted: list[tuple] = []  # beside each frame: the tabs' area as drawn (taken after the frame's time)
    timed_refresh = Screen._compositor_refresh

    def tabs_area(screen: Screen) -> tuple:
        area = screen.query_one("#charts").region
        return tuple(tuple((seg.text, seg.style) for seg in strip.crop(area.x, area.right))
                     for strip in screen._compositor.render_strips()[area.y:area.bottom])

    def painting(screen: Screen) -> None:
        timed_refresh(screen)
        painted.append(tabs_area(screen) if isinstance(screen, RunScreen) else None)

    Screen._compositor_refresh = painting  # type: ignore[method-assign]

    async def go() -> None:
        app = TuidiagApp(path)
        app.animation_level = "none"
        async with app.run_test(size=(160, 48)) as pilot:
            t0 = time.perf_counter()
            while not (isinstance(app.screen, RunScreen) and app.screen.detail is not None):
                await asyncio.sleep(0.01)
                if time.perf_counter() - t0 > 300:
                    raise TimeoutError("run view never drew")
            while not app.screen.detail.diagnosis.findings and time.perf_counter() - t0 < 300:
                await asyncio.sleep(0.1)  # the diagnosis is done (in a background process for a large run): idle
            out["diagnosed"] = time.perf_counter() - t0
            await pilot.pause(viewed)
            from tuidiag.app.run_tabs import RUN_TABS

            unbound = next(k for k in "90" if k not in {tab.key for tab in RUN_TABS})  # "8" became the dist tab
            runs: dict[str, list[tuple[float, float, float, float, float]]] = {"tab": [], "unbound": []}
            first: dict[str, float] = {}
            first_shown: dict[str, float] = {}  # a first visit's first frame: the tab is on screen

            async def switch(key: str, kind: str) -> None:
                """One key through the pilot: (pilot wall, process CPU, app key-to-frame wall, main-thread CPU,
                app key-to-first-frame wall)."""
                frames.clear()
                painted.clear()
                t, c, tc = time.perf_counter(), time.process_time(), time.thread_time()
                await pilot.press(key)
                await pilot.pause()
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                end, end_cpu = frames[-1] if frames else (float("nan"), float("nan"))  # no frame: nothing redrawn
                if painted:  # the first frame of the last run of frames that all show what the area ends as
                    settled = len(painted) - 1
                    while settled > 0 and painted[settled - 1] == painted[-1]:
                        settled -= 1
                    end, end_cpu = frames[settled]
                runs[kind].append((wall, cpu, end - t, end_cpu - tc, frames[0][0] - t if frames else float("nan")))

            keys = [tab.key for tab in RUN_TABS[1:]] + [RUN_TABS[0].key]  # every tab, the first one last
            for key in keys * 3:
                await switch(key, "tab")
                first.setdefault(key, runs["tab"][-1][2])
                first_shown.setdefault(key, runs["tab"][-1][4])
                await switch(unbound, "unbound")
            tabs, floor = runs["tab"][len(keys):], runs["unbound"]
            med = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa: E731
            out["unbound_frames"] = sum(1 for r in floor if r[2] == r[2])  # keys after which a frame was rendered
            out.update(first_visit=first, first_shown=first_shown, revisit_median=med(tabs, 0), revisit_max=max(r[0] for r in tabs),
                       pilot_floor=med(floor, 0), cpu_median=med(tabs, 1), cpu_floor=med(floor, 1),
                       app_median=med(tabs, 2), app_max=max(r[2] for r in tabs),
                       app_cpu_median=med(tabs, 3))

    asyncio.run(go())
    out["rss"] = ms._rss_mb()
    return out


PHASES = {"tb": phase_tb, "overview": phase_overview, "tabs": phase_tabs, "tabs_at_once": lambda path: phase_tabs(path, 0.1),
          "raw": ms.phase_raw, "app": ms.phase_app,
          "raw_root": phase_raw_root, "empty": phase_empty}


def measure(phase: str, path: Path, src: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
               TUIDIAG_CACHE_DIR=tempfile.mkdtemp(prefix="tuidiag-screen-cache-"))
    proc = subprocess.run([sys.executable, str(HERE), "--phase", phase, str(path)], env=env, capture_output=True,
                          text=True, timeout=1800, cwd=str(src))
    if proc.returncode != 0:
        raise RuntimeError(f"phase {phase} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- status and idle CPU --------------------------------------------------------------
def status_cpu(run: Path, src: Path, calls: int = 20) -> float:
    """CPU seconds per ``tuidiag status RUN`` (after one call that fills the cache)."""
    env = dict(os.environ, PYTHONPATH=str(src), TUIDIAG_CACHE_DIR=tempfile.mkdtemp(prefix="tuidiag-status-cache-"))
    command = [sys.executable, "-m", "tuidiag", "status", str(run)]
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, cwd=str(src), check=True)
    time.sleep(1.0)
    return _children_cpu(lambda: [subprocess.run(command, env=env, stdout=subprocess.DEVNULL, cwd=str(src), check=True)
                                  for _ in range(calls)]) / calls


def raw_newest_cpu(run: Path, calls: int = 20) -> float:
    """CPU seconds per process that reads the newest loss the raw pyarrow way (the newest shard's last row group)."""
    code = ("import sys, pyarrow.parquet as pq, pyarrow.compute as pc; from pathlib import Path; "
            "f = pq.ParquetFile(sorted(Path(sys.argv[1]).glob('metrics/*.parquet'))[-1]); "
            "t = f.read_row_group(f.num_row_groups - 1); print(t.filter(pc.equal(t['metric'].cast('string'), 'train/loss'))['value'][-1])")
    return _children_cpu(lambda: [subprocess.run([sys.executable, "-c", code, str(run)], stdout=subprocess.DEVNULL, check=True)
                                  for _ in range(calls)]) / calls


def _children_cpu(work: object) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    work()  # type: ignore[operator]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


# ---- report ---------------------------------------------------------------------------
def _verdict(value: float, target: float) -> str:
    return "PASS" if value <= target else "MISS"


def _ratio(value: float, base: float | None) -> str:
    return f"{value / base:.3f}x" if base else "-"


def report(label: str, src: Path, big: Path, ten: Path, root: Path, raw_big: dict, raw_ten: dict, tb: dict | None,
           names: tuple[str, str]) -> list[tuple]:
    """Measure ``src``, print each figure as it comes, and return the table rows: (target, value, unit, target value,
    CPU, x raw pyarrow, x TensorBoard, pilot's figure)."""
    print(f"\n== {label}: {src} ==", flush=True)
    rows: list[tuple] = []
    empty = ms_best(measure, "empty", Path(tempfile.mkdtemp(prefix="tuidiag-empty-")), src, "first_paint")
    print(f"floor: the app on an empty directory paints first at {empty['first_paint']:.3f} s, {empty['rss']:.0f} MB "
          f"(Textual's start; every frame below includes it)")
    peaks = []
    for key, name, path, raw in (("frame_1m", names[0], big, raw_big), ("frame_10m", names[1], ten, raw_ten)):
        app = ms_best(measure, "app", path, src, "frame_rendered")
        assert Path(app["tuidiag_file"]).is_relative_to(src), (app["tuidiag_file"], src)
        with_tb = tb if path == big else None
        frame = app["frame_rendered"]
        print(f"first full frame, {name:<22} {frame:7.3f} s rendered, {app['cpu']:.3f} s CPU ({_ratio(frame, raw['read'])} raw pyarrow"
              f"{', ' + _ratio(frame, with_tb['read']) + ' TensorBoard' if with_tb else ''}); the pilot saw it idle at "
              f"{app['first_frame']:.3f} s; its data ready at {app['detail_shown']:.3f} s  target {TARGETS[key]} s: "
              f"{_verdict(frame, TARGETS[key])}")
        rows.append((f"first frame, {name}", frame, "s", TARGETS[key], app["cpu"], _ratio(frame, raw["read"]),
                     _ratio(frame, with_tb["read"]) if with_tb else "-", app["first_frame"]))
        print(f"peak RSS,         {name:<22} {app['rss']:7.0f} MB ({_ratio(app['rss'], raw['rss'])} raw pyarrow"
              f"{', ' + _ratio(app['rss'], with_tb['rss']) + ' TensorBoard' if with_tb else ''})"
              f"  target {TARGETS['rss']:.0f} MB: {_verdict(app['rss'], TARGETS['rss'])}")
        peaks.append((app["rss"], name, raw, with_tb))
    rss, name, raw, with_tb = max(peaks, key=lambda p: p[0])
    rows.append((f"peak RSS (largest, {name})", rss, "MB", TARGETS["rss"], None, _ratio(rss, raw["rss"]),
                 _ratio(rss, with_tb["rss"]) if with_tb else "-", None))
    tabs = measure("tabs", ten, src)
    visits = ", ".join(f"{k}: {tabs['first_shown'][k] * 1e3:.0f}/{v * 1e3:.0f}" for k, v in tabs["first_visit"].items())
    print(f"tab switch, {names[1]:<22} key to frame rendered {tabs['app_median'] * 1e3:6.1f} ms median (max {tabs['app_max'] * 1e3:.0f}), "
          f"main-thread CPU {tabs['app_cpu_median'] * 1e3:.1f} ms; an unbound key renders a frame after "
          f"{tabs.get('unbound_frames', 0)} of {len(tabs['first_visit']) * 3} presses; first visits (ms, key to the first frame / to the frame the tabs' area settles in) {visits}  target 50 ms: "
          f"{_verdict(tabs['app_median'], TARGETS['tab'])}")
    print(f"   through the pilot (press + pause until idle): {tabs['revisit_median'] * 1e3:.1f} ms median, max "
          f"{tabs['revisit_max'] * 1e3:.0f} ms, process CPU {tabs['cpu_median'] * 1e3:.1f} ms; an unbound key "
          f"{tabs['pilot_floor'] * 1e3:.0f} ms, {tabs['cpu_floor'] * 1e3:.1f} ms CPU (whole diagnosis shown at "
          f"{tabs.get('diagnosed', float('nan')):.1f} s)")
    rows.append(("tab switch (key to frame)", tabs["app_median"], "s", TARGETS["tab"], tabs["app_cpu_median"],
                 _ratio(tabs["app_median"], raw_ten["read"]), "-", tabs["revisit_median"]))
    at_once = measure("tabs_at_once", ten, src)
    for label, run in (("viewed 2 s", tabs), ("at once", at_once)):
        worst = max(run["first_visit"].values())
        print(f"first visits, {label:<10} key to the frame the tabs' area settles in (ms): "
              + ", ".join(f"{k}: {v * 1e3:.0f}" for k, v in run["first_visit"].items())
              + f"  worst {worst * 1e3:.0f} ms, target 50 ms: {_verdict(worst, TARGETS['tab'])}")
        rows.append((f"tab first visit, worst ({label})", worst, "s", TARGETS["tab"], None,
                     _ratio(worst, raw_ten["read"]), "-", None))
    over = measure("overview", root, src)
    raw_root = measure("raw_root", root, REPO)["read"]
    print(f"overview of {over['runs']} runs first drawn  {over['first_drawn']:7.3f} s, {over['cpu']:.3f} s CPU  "
          f"({_ratio(over['first_drawn'], raw_root)} raw pyarrow read of every run, {raw_root:.2f} s)  target 0.5 s: "
          f"{_verdict(over['first_drawn'], TARGETS['overview'])};  its rows ready at {over.get('rows_ready', float('nan')):.3f} s;  "
          f"the pilot found it idle at {over['pilot_idle']:.3f} s;  "
          f"every health badge in {over['all_health']:.1f} s;  peak RSS {over['rss']:.0f} MB")
    rows.append((f"overview of {over['runs']} runs", over["first_drawn"], "s", TARGETS["overview"], over["cpu"],
                 _ratio(over["first_drawn"], raw_root), "-", over["pilot_idle"]))
    status, raw_status = status_cpu(big, src), raw_newest_cpu(big)
    print(f"tuidiag status, {names[0]:<14} {status:7.3f} s CPU per call ({_ratio(status, raw_status)} the raw pyarrow "
          f"newest-loss read, {raw_status:.3f} s)  target 0.15 s: {_verdict(status, TARGETS['status'])}")
    rows.append(("tuidiag status CPU/call", status, "s", TARGETS["status"], status, _ratio(status, raw_status), "-", None))
    return rows


def table(label: str, rows: list[tuple]) -> None:
    """The targets of one source: value (wall, or CPU for the status line), CPU, ratios, PASS/MISS."""
    print(f"\n{label}: target | value | limit | CPU | x raw pyarrow | x TensorBoard | through the pilot | verdict")
    for name, value, unit, target, cpu, raw, tb, pilot in rows:
        scale, shown = (1e3, "ms") if unit == "s" and target < 0.1 else (1.0, unit)
        cpu_text = f"{cpu * scale:.3f} {shown}" if cpu is not None else "-"
        pilot_text = f"{pilot * scale:.3f} {shown}" if pilot is not None else "-"
        print(f"  {name:<34} {value * scale:9.3f} {shown:<3} <= {target * scale:g} {shown:<3} CPU {cpu_text:<12} {raw:>9} {tb:>9} "
              f"{pilot_text:>12}  {_verdict(value, target)}")


def ms_best(fn: object, phase: str, path: Path, src: Path, key: str, repeat: int = 2) -> dict:
    results = [fn(phase, path, src) for _ in range(repeat)]  # type: ignore[operator]
    return min(results, key=lambda r: r[key])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--run-steps", type=int, default=1_000)
    parser.add_argument("--data", type=Path, default=Path("/tmp/tuidiag-screen"))
    parser.add_argument("--src", type=Path, help="another checkout (the dir holding tuidiag/) measured the same way")
    parser.add_argument("--skip-tb", action="store_true")
    parser.add_argument("--skip-cpu", action="store_true")
    parser.add_argument("--cpu-window", type=float, default=20.0)
    parser.add_argument("--cpu-warmup", type=float, default=30.0, help="seconds before the idle CPU window (first reads and diagnoses)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        import tuidiag

        result = PHASES[args.phase](args.path)
        result["tuidiag_file"] = tuidiag.__file__
        print(json.dumps(result))
        return
    big, ten = big_run(args.data, args.steps), big_run(args.data, args.rows // len(ms.METRICS))
    root = ms.many_runs(args.data, args.runs, args.run_steps)
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}; runs: {args.steps:,} x {len(ms.METRICS)}, "
          f"{args.rows:,} rows, {args.runs} x {args.run_steps:,} steps", flush=True)
    raw_big, raw_ten = measure("raw", big, REPO), measure("raw", ten, REPO)
    print(f"raw pyarrow: {args.steps:,} x {len(ms.METRICS)}: {raw_big['read']:.2f} s ({raw_big['cpu']:.2f} s CPU) {raw_big['rss']:.0f} MB;  "
          f"{args.rows:,} rows: {raw_ten['read']:.2f} s ({raw_ten['cpu']:.2f} s CPU) {raw_ten['rss']:.0f} MB")
    tb = None
    if not args.skip_tb:
        tb = measure("tb", tensorboard_copy(args.data, big, args.steps), REPO)
        print(f"TensorBoard EventAccumulator (default guidance) on the same {args.steps:,} x {len(ms.METRICS)} scalars: {tb['read']:.2f} s ({tb['cpu']:.2f} s CPU), {tb['rss']:.0f} MB, "
              f"keeps {tb['kept']:,} of {args.steps * len(ms.METRICS):,} scalars")
    sources = [("current", REPO)] + ([("--src", args.src.resolve())] if args.src else [])
    tables = [(label, report(label, src, big, ten, root, raw_big, raw_ten, tb,
                             (f"{args.steps:,} steps x {len(ms.METRICS)}", f"{args.rows:,} rows"))) for label, src in sources]
    print(f"\nload average now {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    for label, rows in tables:
        table(label, rows)
    if not args.skip_cpu:
        command = [sys.executable, str(HERE.parent / "monitor_cpu.py"), "--window", str(args.cpu_window), "--warmup", str(args.cpu_warmup)]
        if args.src:
            command += ["--src", str(args.src.resolve())]
        print(f"\n== idle CPU with 10 live trainings: {' '.join(command[1:])} ==", flush=True)
        subprocess.run(command, check=False)


if __name__ == "__main__":
    main()
