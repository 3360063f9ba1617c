"""How long ``diagnose`` takes on a long run: a synthetic 1,000,000-step recording.

Writes a run directory in the real format (Parquet shards + ``run.json``) with
``train/loss``, ``grad_norm/total``, ``lr/group0`` and per-layer gradient norms on
every step, update ratios every 25 steps and validation every 1,000, then times
``open_run`` and ``diagnose`` (the monitor calls it after every refresh, on a run it
keeps open), in wall time and in this process's CPU time (the machine may be shared). Usage::

    python benchmarks/diagnose_speed.py [--steps 1000000] [--layers 4] [--repeat 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.format import METRICS_DIR, METRICS_SCHEMA, STATUS_FINISHED, ShardName  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.store.manifest import new_manifest, write_manifest  # noqa: E402
from tuidiag.store.shards import write_table_atomic  # noqa: E402

CHUNK = 100_000


def series(steps: int, layers: int, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Plausible curves of a long healthy run: name -> (steps, values)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    loss = 2.0 * np.exp(-t / (steps / 5)) + 0.3 + 0.05 * rng.standard_normal(steps)
    out = {"train/loss": (t, np.abs(loss)), "lr/group0": (t, 1e-3 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * t / steps))))}
    norms = [(t, np.abs(0.5 + 0.1 * rng.standard_normal(steps))) for _ in range(layers)]
    out |= {f"grad_norm/layer{i}.weight": n for i, n in enumerate(norms)}
    out["grad_norm/total"] = (t, np.sqrt(sum(n[1] ** 2 for n in norms)))
    sparse = t[::25]
    out |= {f"update_ratio/layer{i}.weight": (sparse, 1e-3 * (1 + 0.1 * rng.standard_normal(len(sparse)))) for i in range(layers)}
    val = t[::1000]
    out["val/loss"] = (val, 2.0 * np.exp(-val / (steps / 5)) + 0.35)
    return out


def write_run(run_dir: Path, steps: int, layers: int) -> Path:
    """Write the synthetic run as shards of ``CHUNK`` steps each, plus a finished manifest."""
    (run_dir / METRICS_DIR).mkdir(parents=True, exist_ok=True)
    data = series(steps, layers)
    names = list(data)
    dictionary = pa.array(names, pa.string())
    for seq, lo in enumerate(range(0, steps, CHUNK)):
        parts = [(np.full(int(((s >= lo) & (s < lo + CHUNK)).sum()), code, np.int32), s[(s >= lo) & (s < lo + CHUNK)], v[(s >= lo) & (s < lo + CHUNK)])
                 for code, (s, v) in enumerate(data[n] for n in names)]
        codes, step, value = (np.concatenate(p) for p in zip(*parts))
        n = len(step)
        table = pa.Table.from_arrays(
            [pa.array(step, pa.int64()), pa.array(step * 0.01, pa.float64()), pa.DictionaryArray.from_arrays(pa.array(codes), dictionary),
             pa.array(value, pa.float64()), pa.array(np.zeros(n, np.int32)), pa.array(np.full(n, seq, np.int64))],
            schema=METRICS_SCHEMA,
        )
        write_table_atomic(run_dir / METRICS_DIR / ShardName(0, seq, seq).filename, table)
    manifest = new_manifest("speed-1M", {"lr": 1e-3, "batch_size": 64}, 1, 1.0)
    params = [{"name": f"layer{i}.weight", "shape": [256, 256], "numel": 65536, "trainable": True} for i in range(layers)]
    manifest.update(status=STATUS_FINISHED, last_step=steps - 1, model={"params": params, "n_trainable": 65536 * layers})
    write_manifest(run_dir, manifest)
    return run_dir


def timed(fn, repeat: int) -> tuple[float, object, float]:
    """Median wall time of ``fn()`` over ``repeat`` calls, its last result, and the median CPU time of this process."""
    times, cpu, result = [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), result, statistics.median(cpu)


def main(argv: list[str] | None = None) -> int:
    """Build the run, then time reading it and diagnosing it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the run (default: a temporary directory)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_run((args.dir or Path(tmp)) / "speed-1M", args.steps, args.layers)
        read_s, run, read_cpu = timed(lambda: open_run(run_dir), 1)
        first_s, result, first_cpu = timed(lambda: diagnose(run), 1)
        again_s, _, again_cpu = timed(lambda: diagnose(run), args.repeat)
        at_s, _, at_cpu = timed(lambda: diagnose(run, at=args.steps // 2), args.repeat)
    print(f"{args.steps:,} steps, {len(run.metric_names)} metrics, {run.rows_read:,} rows")
    print("                                    wall       CPU")
    print(f"open_run (read shards)          {read_s * 1e3:8.1f} ms {read_cpu * 1e3:8.1f} ms")
    print(f"diagnose, first call            {first_s * 1e3:8.1f} ms {first_cpu * 1e3:8.1f} ms   (top: {result.top.code})")
    print(f"diagnose, again (median of {args.repeat})   {again_s * 1e3:8.1f} ms {again_cpu * 1e3:8.1f} ms")
    print(f"diagnose(at=mid-run)            {at_s * 1e3:8.1f} ms {at_cpu * 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
