"""What the read limits cost and what they save: the red team's files, before and after.

``python benchmarks/read_limits.py [--before /path/to/an/older/checkout]``

1. Exit status and peak RSS of ``ls``, ``diagnose`` and ``query`` on each of four runs (a
   524 MB sparse ``run.json``, a 5,000-level config, a shard whose footer claims 10^12
   rows, a shard named ``r0-000000002-999999999999``) and of ``status --no-diagnosis`` on
   the first, each command on one run in its own interpreter. With ``--before``, the same
   commands run against that checkout's code too (``PYTHONPATH``).
2. The cost of the depth check: ``json_depth`` against ``json.loads`` on a 9 MB ``run.json``
   holding 100,000 nested config entries.
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

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # the recorder without torch

import tuidiag  # noqa: E402
from tests.parquet_forge import FILE_NUM_ROWS, forge  # noqa: E402
from tuidiag.store.limits import json_depth  # noqa: E402

MEASURE = ("import sys; from tuidiag.cli.main import main; rc = main(sys.argv[1:]); "
           "hwm = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]; "
           "print('PEAK_RSS_KB', hwm, file=sys.stderr); sys.exit(rc)")
"""The command, then its peak RSS from ``VmHWM`` (``ru_maxrss`` survives ``exec`` and would report this process's peak)."""


def _run(path: Path) -> Path:
    with tuidiag.Recorder(path, flush_interval=3600, control=False) as rec:
        for step in range(40):
            rec.log({"train/loss": 1.0 / (step + 1)}, step=step)
            if step % 10 == 9:
                rec.flush()
    return path


def build(root: Path) -> None:
    """The red team's runs under ``root``."""
    big = _run(root / "big")
    with open(big / "run.json", "r+b") as handle:
        handle.truncate(524 * (1 << 20))
    deep = _run(root / "deep")
    (deep / "run.json").write_text('{"config": ' + "[" * 5000 + "]" * 5000 + "}")
    forged = _run(root / "forged")
    shard = sorted((forged / "metrics").glob("r0-*.parquet"))[0]
    (forged / "metrics" / "r0-000000050-000000050.parquet").write_bytes(forge(shard.read_bytes(), FILE_NUM_ROWS, 10**12))
    (forged / "metrics" / "r0-000000060-000000060.parquet").write_bytes(shard.read_bytes())
    wide = _run(root / "wide")
    shutil.copy(shard, wide / "metrics" / "r0-000000000-000000099.parquet")
    shutil.copy(shard, wide / "metrics" / "r0-000000002-999999999999.parquet")


RUNS = ("big", "deep", "forged", "wide")


def commands(root: Path) -> list[list[str]]:
    """Each command on each run alone (one failure must not hide another)."""
    per_run = [[["ls", str(root / run)], ["diagnose", str(root / run)],
                ["query", "--root", str(root / run), "select count(*) from metrics"]] for run in RUNS]
    return [["status", "--no-diagnosis", str(root / "big")], *(c for group in per_run for c in group)]


def measure(code: Path, root: Path) -> None:
    env = os.environ | {"PYTHONPATH": str(code), "TUIDIAG_CACHE_DIR": str(root / ".cache")}
    for argv in commands(root):
        done = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, env=env, cwd=root)
        rss = next((line.split()[1] for line in done.stderr.splitlines() if line.startswith("PEAK_RSS_KB")), "?")
        error = next((line for line in reversed(done.stderr.splitlines()) if "Error" in line), "")
        label = f"{argv[0]} {Path(argv[-1] if argv[0] != 'query' else argv[2]).name}"
        peak = f"{int(rss) // 1024} MB" if rss != "?" else "-"
        print(f"  {label:<16} exit {done.returncode}  peak RSS {peak:>7}  {error[:90]}")


def depth_cost() -> None:
    config = {f"layer{i}": {"sizes": [i, i + 1, [i, {"a": 'x]"' * 3}]], "name": f'n{i}\\"'} for i in range(100_000)}
    text = json.dumps({"config": config})
    start = time.perf_counter()
    json_depth(text)
    scan = time.perf_counter() - start
    start = time.perf_counter()
    json.loads(text)
    parse = time.perf_counter() - start
    print(f"depth check on a {len(text) / 1e6:.1f} MB run.json: {scan:.3f} s (json.loads: {parse:.3f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of tuidiag without the limits, to compare with")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tuidiag-limits-"))
    try:
        build(root)
        for label, code in (("before", args.before), ("after", HERE)):
            if code is not None:
                print(f"{label} ({code}):")
                measure(code, root)
        depth_cost()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
