"""Head-to-head with what users run today, in one run: recorder overhead per step, opening a
1,000,000-step run, and file sizes.

1. Overhead: the loop of ``recorder_overhead.py`` (8 Linear layers of width 256, batch
   64, Adam, CPU) in interleaved blocks: bare; ``tuidiag.Recorder`` (``watch`` + ``step``:
   loss, LR, total and per-parameter gradient norms every step, more every 25/50 steps);
   TensorBoard ``SummaryWriter.add_scalar`` of loss, LR, total and per-parameter gradient
   norms every step; and W&B ``wandb.log`` of the same in offline mode, when wandb
   imports (``--wandb-path DIR`` adds a directory where it was installed with
   ``pip install --target DIR wandb``, appended to ``sys.path`` so it shadows nothing).
2. Open: the same ``--steps`` steps x 4 scalars (loss, LR, grad norm, val loss every
   100 steps) written once through ``tuidiag.Recorder.log`` and through ``SummaryWriter``
   (cached under ``--data``). Each reader runs in a fresh process: ``tuidiag.open_run``
   plus every series; TensorBoard's ``EventAccumulator`` with ``size_guidance`` 0 (keep
   every scalar) plus ``Scalars`` of every tag; and ``EventAccumulator`` with its default
   guidance (keeps a 10,000-point sample per tag, so it drops rows).
3. File sizes of both on disk.

Usage::

    python benchmarks/peers.py [--steps 1000000] [--blocks 9] [--block-steps 150] [--wandb-path DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(REPO))

TAGS = ("train/loss", "lr/group0", "grad_norm/total")
VAL_EVERY = 100


# ---- 1. overhead per step ---------------------------------------------------------
def overhead(blocks: int, block_steps: int) -> None:
    import torch

    from recorder_overhead import Modes, train_steps

    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    with tempfile.TemporaryDirectory() as tmp:
        modes = Modes("cpu", Path(tmp))
        hooks = {name: modes.hook(name) for name in modes.models}
        wandb_run = _wandb_run(Path(tmp))
        if wandb_run is not None:
            model, _ = modes.models["bare"]
            modes.models["wandb"] = (model, torch.optim.Adam(model.parameters(), 1e-3))
            hooks["wandb"] = _wandb_hook(wandb_run, *modes.models["wandb"])
        times: dict[str, list[float]] = {name: [] for name in modes.models}
        for name in modes.models:
            train_steps(*modes.models[name], x, y, 20, hooks[name])
        for block in range(blocks):
            order = list(modes.models) if block % 2 == 0 else list(reversed(modes.models))
            for name in order:
                times[name].append(train_steps(*modes.models[name], x, y, block_steps, hooks[name]))
        modes.close()
        if wandb_run is not None:
            wandb_run.finish()
    print(f"\n== 1. overhead per training step (CPU, torch {torch.__version__}, {blocks} blocks x {block_steps} steps) ==")
    print(f"{'mode':<12} {'median ms/step':>15} {'overhead vs bare':>17} {'vs tuidiag':>11}")
    bare = times["bare"]
    mine = statistics.median([t - b for t, b in zip(times["tuidiag"], bare, strict=True)])
    for name, samples in times.items():
        extra = statistics.median([t - b for t, b in zip(samples, bare, strict=True)])
        ratio = f"{extra / mine:10.1f}x" if name not in ("bare", "tuidiag") and mine > 0 else ""
        print(f"{name:<12} {statistics.median(samples) * 1e3:>15.3f} {extra * 1e3:>14.3f} ms {ratio:>11}")
    if wandb_run is None:
        print("wandb: not importable (pass --wandb-path DIR after `pip install --target DIR wandb`); skipped")


def _wandb_run(tmp: Path):
    try:
        import wandb
    except Exception as exc:  # any import failure means: not measured
        print(f"(wandb unavailable: {type(exc).__name__}: {exc})")
        return None
    os.environ.setdefault("WANDB_SILENT", "true")
    return wandb.init(mode="offline", dir=str(tmp), project="tuidiag-peers", settings=wandb.Settings(console="off"))


def _wandb_hook(run, model, optimizer):
    import torch

    def hook(step: int, loss) -> None:
        norms = {f"grad_norm/{n}": p.grad.norm().item() for n, p in model.named_parameters() if p.grad is not None}
        total = float(torch.linalg.vector_norm(torch.tensor(list(norms.values()))))
        run.log({"train/loss": loss.item(), "lr/group0": optimizer.param_groups[0]["lr"], "grad_norm/total": total, **norms})

    return hook


# ---- 2. the same data written by both ----------------------------------------------
def _value(step: int, total: int) -> tuple[float, float, float]:
    t = step / total
    return 2.0 / (1.0 + 10 * t) + 0.01 * ((step * 7919) % 13), 1e-3 * (1 - t), 1.0 + 0.1 * ((step * 104729) % 7)


def write_tuidiag(path: Path, steps: int) -> None:
    import tuidiag

    with tuidiag.Recorder(path, flush_interval=1.0, max_queue=1_000_000) as rec:
        for step in range(steps):
            loss, lr, grad = _value(step, steps)
            rec.log({"train/loss": loss, "lr/group0": lr, "grad_norm/total": grad}, step=step)
            if step % VAL_EVERY == 0:
                rec.log({"val/loss": loss * 1.1}, step=step)
        dropped = rec.dropped_rows
    assert dropped == 0, f"{dropped} rows dropped while writing the benchmark data"


def write_tensorboard(path: Path, steps: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(path), max_queue=1000, flush_secs=120)
    for step in range(steps):
        loss, lr, grad = _value(step, steps)
        writer.add_scalar("train/loss", loss, step)
        writer.add_scalar("lr/group0", lr, step)
        writer.add_scalar("grad_norm/total", grad, step)
        if step % VAL_EVERY == 0:
            writer.add_scalar("val/loss", loss * 1.1, step)
    writer.close()


def ensure_data(data: Path, steps: int) -> tuple[Path, Path, dict[str, float]]:
    ours, theirs = data / f"tuidiag-{steps}", data / f"tb-{steps}"
    write_times = {}
    for path, write in ((ours, write_tuidiag), (theirs, write_tensorboard)):
        done = path.parent / f"{path.name}.done"
        if not done.exists():
            t = time.perf_counter()
            write(path, steps)
            done.write_text(str(time.perf_counter() - t))
        write_times[path.name] = float(done.read_text())
    return ours, theirs, write_times


# ---- readers, each in a fresh process ------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def read_tuidiag(path: Path) -> dict:
    import tuidiag

    t = time.perf_counter()
    run = tuidiag.open_run(path)
    rows = sum(len(run.series(name)) for name in run.metric_names)
    return {"seconds": time.perf_counter() - t, "rows": rows, "loss_rows": len(run.series("train/loss")), "rss": _rss_mb()}


def read_tensorboard(path: Path, keep_all: bool = True) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t = time.perf_counter()
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0} if keep_all else None)
    acc.Reload()
    tags = acc.Tags()["scalars"]
    rows = sum(len(acc.Scalars(tag)) for tag in tags)
    return {"seconds": time.perf_counter() - t, "rows": rows, "loss_rows": len(acc.Scalars("train/loss")), "rss": _rss_mb()}


READERS = {"tuidiag": read_tuidiag, "tensorboard": read_tensorboard,
           "tensorboard-default": lambda p: read_tensorboard(p, keep_all=False)}


def measure(reader: str, path: Path, repeat: int) -> dict:
    """The fastest of ``repeat`` fresh processes running ``reader`` on ``path``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    results = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, str(HERE), "--reader", reader, str(path)], env=env,
                              capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return min(results, key=lambda r: r["seconds"])


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def open_and_sizes(data: Path, steps: int, repeat: int) -> None:
    ours, theirs, write_times = ensure_data(data, steps)
    print(f"\n== 2. opening a {steps:,}-step run (3 scalars/step + val every {VAL_EVERY}), fastest of {repeat} fresh processes ==")
    mine = measure("tuidiag", ours, repeat)
    print(f"{'reader':<34} {'seconds':>8} {'rows read':>11} {'peak RSS':>9} {'time vs tuidiag':>16}")
    for label, reader, path in (("tuidiag.open_run + all series", "tuidiag", ours),
                                ("EventAccumulator (keep all)", "tensorboard", theirs),
                                ("EventAccumulator (default: sampled)", "tensorboard-default", theirs)):
        r = mine if reader == "tuidiag" else measure(reader, path, repeat)
        print(f"{label:<34} {r['seconds']:>8.2f} {r['rows']:>11,} {r['rss']:>7.0f} MB {r['seconds'] / mine['seconds']:>15.1f}x")
    size_ours, size_theirs = _size_mb(ours), _size_mb(theirs)
    print(f"\n== 3. file sizes of the same {steps:,} steps ==")
    print(f"tuidiag (Parquet, zstd)   {size_ours:8.1f} MiB   written in {write_times[ours.name]:.0f} s via Recorder.log")
    print(f"TensorBoard event files   {size_theirs:8.1f} MiB   written in {write_times[theirs.name]:.0f} s via SummaryWriter "
          f"({size_theirs / size_ours:.1f}x tuidiag's size)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--blocks", type=int, default=9)
    parser.add_argument("--block-steps", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--data", type=Path, default=Path("/tmp/tuidiag-peers"))
    parser.add_argument("--wandb-path", type=Path, help="a directory holding wandb (pip install --target DIR wandb)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--reader", help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reader:
        print(json.dumps(READERS[args.reader](args.path)))
        return
    if args.wandb_path:
        sys.path.append(str(args.wandb_path))
    print(f"cpus={os.cpu_count()}")
    if not args.skip_overhead:
        overhead(args.blocks, args.block_steps)
    args.data.mkdir(parents=True, exist_ok=True)
    open_and_sizes(args.data, args.steps, args.repeat)


if __name__ == "__main__":
    main()
