"""How long ``tuidiag status`` takes on a 1M-step run (8 metrics a step: 8M rows).

Writes the run with the store's shard writer (``write_table_atomic``) in two layouts,
100 shards of 10k steps (a live run) and one compacted shard (a closed run), then
times: the tail read alone, the command without the finding, the command with a cold
cache (it starts the background diagnosis), the background diagnosis itself, and the
command with a warm cache. Usage: ``python benchmarks/status_speed.py [--steps N]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from tuidiag.cli import status_cache
from tuidiag.format import METRICS_DIR, METRICS_SCHEMA, ShardName
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.store.shards import write_table_atomic
from tuidiag.store.tail import latest

METRICS = (
    "train/loss",
    "lr/group0",
    "grad_norm/total",
    "grad_norm/l0.weight",
    "grad_norm/l1.weight",
    "grad_norm/l2.weight",
    "time/step",
    "time/data_wait",
)


FLUSH_STEPS = 10_000


def shard_table(first_step: int, steps: int) -> pa.Table:
    """Rows of ``steps`` steps from ``first_step``, every metric each step, one flush per 10k steps."""
    step = np.repeat(np.arange(first_step, first_step + steps, dtype=np.int64), len(METRICS))
    codes = np.tile(np.arange(len(METRICS), dtype=np.int32), steps)
    t = step.astype(float)
    value = np.where(codes == 0, 2.0 * np.exp(-t / 2e5) + 0.1, 1e-3) * (1 + 0.01 * np.sin(t))
    metric = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(METRICS))
    return pa.table(
        {
            "step": step,
            "wall_time": 1.7e9 + t * 0.01,
            "metric": metric,
            "value": value,
            "rank": np.zeros(len(step), np.int32),
            "seq": step // FLUSH_STEPS,
        },
        schema=METRICS_SCHEMA,
    )


def write_run(run_dir: Path, steps: int, shards: int) -> None:
    """A finished run of ``steps`` steps in ``shards`` shards (one flush each, merged when ``shards == 1``)."""
    (run_dir / METRICS_DIR).mkdir(parents=True)
    per = steps // shards
    for i in range(shards):
        first, last = i * per // FLUSH_STEPS, ((i + 1) * per - 1) // FLUSH_STEPS
        write_table_atomic(run_dir / METRICS_DIR / ShardName(0, first, last).filename, shard_table(i * per, per))
    info = new_manifest(run_dir.name, {"lr": 1e-3}, 1, 1.0)
    info.update(status="finished", last_step=steps - 1, heartbeat=time.time())
    write_manifest(run_dir, info)


def timed(command: list[str], repeat: int = 3) -> str:
    """Median wall and CPU (user + system) seconds of running ``command``; CPU is far less sensitive to load."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return f"{np.median(walls):.2f} s wall, {np.median(cpus):.2f} s CPU"


def measure(run_dir: Path) -> None:
    """Print the timings for one run."""
    cli = [sys.executable, "-m", "tuidiag", "status", str(run_dir)]
    start = time.perf_counter()
    found = latest(run_dir, "train/loss")
    print(
        f"  tail read in-process: {(time.perf_counter() - start) * 1e3:.1f} ms (step {found.step if found else None})"
    )
    print(f"  python -c pass (interpreter floor): {timed([sys.executable, '-c', 'pass'])}")
    print(f"  status --no-diagnosis: {timed(cli + ['--no-diagnosis'])}")
    print(f"  status, cold cache (starts the background diagnosis): {timed(cli, 1)}")
    deadline = time.time() + 600
    while status_cache.load(run_dir) is None and time.time() < deadline:
        time.sleep(0.5)
    entry = status_cache.load(run_dir) or {}
    print(f"  background diagnosis: {entry.get('cost', float('nan')):.2f} s -> {entry.get('top', {}).get('code')}")
    print(f"  status, warm cache: {timed(cli)}")


def main() -> None:
    """Build the runs and print the timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TUIDIAG_CACHE_DIR"] = str(Path(tmp) / "cache")
        for shards in (100, 1):
            run_dir = Path(tmp) / f"run-{shards}"
            start = time.perf_counter()
            write_run(run_dir, args.steps, shards)
            size = sum(p.stat().st_size for p in (run_dir / METRICS_DIR).iterdir()) / 2**20
            took = time.perf_counter() - start
            print(f"{args.steps:,} steps, {shards} shard(s), {size:.1f} MiB, written in {took:.1f} s")
            measure(run_dir)


if __name__ == "__main__":
    main()
