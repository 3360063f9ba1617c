"""Two recorders continue one finished run at the same moment: how often are rows lost?

Each try records a 10-step run into ``x``, then starts two ``Recorder(x, resume="allow")``
in two threads released by one barrier; both record 300 steps and close. Rows are
lost when both continue ``x`` (their shards get the same names, one replaces the
other's): ``x`` and its siblings then hold fewer than 10 + 2 x 300 loss rows.

Usage::

    python benchmarks/two_writers.py [--tries 20] [--src DIR]   # DIR: another checkout, e.g. before a change
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve()
STEPS = 300


def one_try(root: Path) -> tuple[list[str], int]:
    """The directories the two recorders wrote, and the loss rows found in them."""
    import tuidiag

    with tuidiag.Recorder(root / "x", flush_interval=3600, control=False) as rec:
        for _ in range(10):
            rec.step(1.0)
    gate = threading.Barrier(2)
    recorders: list[tuidiag.Recorder] = []

    def start() -> None:
        gate.wait()
        recorders.append(tuidiag.Recorder(root / "x", resume="allow", flush_interval=0.05, control=False))

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(STEPS):
        for rec in recorders:
            rec.step(float(i))
    for rec in recorders:
        rec.close()
    dirs = sorted({rec.run_dir for rec in recorders})
    return [d.name for d in dirs], sum(len(tuidiag.open_run(d).series("train/loss")) for d in dirs)


def run(tries: int) -> None:
    lost = 0
    for _ in range(tries):
        dirs, rows = one_try(Path(tempfile.mkdtemp(prefix="two-writers-")))
        lost += rows != 10 + 2 * STEPS
    import tuidiag

    print(f"{Path(tuidiag.__file__).parent}: rows lost in {lost} of {tries} tries")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--src", type=Path, help="also run with this checkout's tuidiag (the directory holding tuidiag/)")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.here:
        run(args.tries)
        return
    for src in [HERE.parent.parent] + ([args.src] if args.src else []):
        env = dict(os.environ, PYTHONPATH=str(src))
        subprocess.run([sys.executable, str(HERE), "--here", "--tries", str(args.tries)], env=env, check=True,
                       stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
