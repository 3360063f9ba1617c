"""What re-running into a directory costs: choosing it, and reading a run that was resumed.

``python benchmarks/resume_cost.py [--steps 200000] [--metrics 5] [--siblings 100]``

1. ``Recorder(dir)`` start-up when ``dir`` is free, holds a run (goes to ``dir-1``), and holds a
   run with ``--siblings`` ``dir-N`` next to it (goes to ``dir-<siblings+1>``).
2. Reading a run of ``--steps`` x ``--metrics`` rows resumed half-way from an older
   checkpoint (the second session rewrites the second half): ``open_run`` and every
   ``series()``, against the same rows read with the resume boundary ignored.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # the recorder without torch: no import cost in the timings

import tuidiag  # noqa: E402


def _start(path: Path) -> tuple[float, str]:
    t = time.perf_counter()
    rec = tuidiag.Recorder(path, flush_interval=3600, control=False)
    elapsed = time.perf_counter() - t
    rec.close()
    return elapsed, rec.run_dir.name


def _write(path: Path, steps: range, metrics: int, offset: float, **kwargs: object) -> None:
    names = [f"m{i}" for i in range(metrics)]
    with tuidiag.Recorder(path, flush_interval=3600, max_queue=10**7, **kwargs) as rec:
        for step in steps:
            rec.log(dict(zip(names, np.full(metrics, offset + step))), step=step)
            if step % 20_000 == 0:
                rec.flush()


def _read(path: Path, ignore_resumes: bool) -> float:
    t = time.perf_counter()
    run = tuidiag.open_run(path)
    if ignore_resumes:
        run._boundaries = ()
    total = sum(len(run.series(name)) for name in run.metric_names)
    elapsed = time.perf_counter() - t
    print(f"  rows returned {total:,}{' (resume ignored)' if ignore_resumes else ''}")
    return elapsed


def main() -> None:
    """Print the timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--metrics", type=int, default=5)
    parser.add_argument("--siblings", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        free, name = _start(root / "a")
        print(f"Recorder start, free directory: {free * 1e3:.1f} ms -> {name}")
        taken, name = _start(root / "a")
        print(f"Recorder start, directory holds a run: {taken * 1e3:.1f} ms -> {name}")
        for n in range(2, args.siblings + 1):
            (root / f"a-{n}").mkdir()
            (root / f"a-{n}" / "run.json").write_text("{}")
        crowded, name = _start(root / "a")
        print(f"Recorder start, {args.siblings} siblings: {crowded * 1e3:.1f} ms -> {name}")

        run = root / "resumed"
        half = args.steps // 2
        _write(run, range(args.steps), args.metrics, 0.0)
        _write(run, range(half, args.steps), args.metrics, 0.5, resume="allow", start_step=half)
        print(f"run of {2 * args.steps - half:,} steps x {args.metrics} metrics written, resumed at step {half:,}")
        ignored = min(_read(run, True) for _ in range(3))
        honoured = min(_read(run, False) for _ in range(3))
        print(f"open_run + every series: {honoured:.3f} s with the resume honoured, {ignored:.3f} s ignoring it "
              f"(best of 3; {honoured / ignored:.2f}x)")


if __name__ == "__main__":
    main()
