"""Cost of one ``Recorder.step`` / ``Recorder.log`` call on the training thread.

Thread CPU time (``time.thread_time``, so the writer thread and other processes
count less than in wall time) per call, the minimum over blocks of calls, for a
tensor and a float loss, two floats, a float and a 0-d tensor, and (where the
recorder summarises them) a 1000-element tensor. With ``--src DIR`` a second
checkout (``DIR/tuidiag``, e.g. the code before a change) is measured the same
way, alternating rounds in fresh processes so machine noise hits both alike::

    python benchmarks/log_call_cost.py [--rounds 3] [--calls 3000] [--blocks 9] [--src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def measure(calls: int, blocks: int) -> dict[str, float]:
    """Microseconds per call of each case, in this process."""
    import torch

    import tuidiag

    torch.set_num_threads(1)

    def per_call(fn: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(blocks):
            start = time.thread_time()
            for _ in range(calls):
                fn()
            best = min(best, (time.thread_time() - start) / calls)
        return best * 1e6

    with tempfile.TemporaryDirectory() as tmp:
        rec = tuidiag.Recorder(Path(tmp) / "run", flush_interval=0.5, max_queue=10**7)
        loss, acc, emb = torch.tensor(0.5), torch.tensor(0.25), torch.randn(1000)
        out = {
            "step(tensor)": per_call(lambda: rec.step(loss)),
            "step(float)": per_call(lambda: rec.step(0.5)),
            "log(2 floats)": per_call(lambda: rec.log({"a": 1.0, "b": 2.0})),
            "log(float, 0-d tensor)": per_call(lambda: rec.log({"a": 1.0, "b": acc})),
        }
        before = rec.rejected_values if hasattr(rec, "rejected_values") else None
        cost = per_call(lambda: rec.log({"emb": emb}))
        if before is not None and rec.rejected_values == before:  # summarised, not refused
            out["log(1000-element tensor)"] = cost
        rec.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--blocks", type=int, default=9)
    parser.add_argument("--src", type=Path, help="another checkout (the dir holding tuidiag/) measured the same way")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.calls, args.blocks)))
        return
    sources = {"this": ROOT} | ({"src": args.src.resolve()} if args.src else {})
    results: dict[str, list[dict[str, float]]] = {name: [] for name in sources}
    for _ in range(args.rounds):
        for name, src in sources.items():
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]))
            argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--calls", str(args.calls), "--blocks", str(args.blocks)]
            done = subprocess.run(argv, env=env, cwd=str(src), check=True, capture_output=True, text=True)
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    for name, rounds in results.items():
        cases = sorted({case for r in rounds for case in r}, key=lambda c: list(rounds[0]).index(c) if c in rounds[0] else 99)
        line = ", ".join(f"{case} {min(r[case] for r in rounds if case in r):.1f}-{max(r[case] for r in rounds if case in r):.1f} us"
                         for case in cases)
        print(f"{name} ({sources[name]}): {line}")


if __name__ == "__main__":
    main()
