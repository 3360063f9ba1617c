"""The issue's hostile calls, replayed against a checkout: what raised, and what reached the disk.

Each case runs in a fresh process (``PYTHONPATH`` set to the checkout) and prints one
line: the exception that escaped into the "training", or what the shards and
``run.json`` hold afterwards (rows of the names that matter, events, status,
recorder counts). With ``--src DIR`` the same cases run against ``DIR/tuidiag``
too (the code before a change), side by side::

    python benchmarks/hostile_calls.py [--src DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
STEPS = 20


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr refused")


def _summary(run_dir: Path, names: tuple[str, ...] = ("train/loss",)) -> dict[str, Any]:
    import pyarrow.parquet as pq

    metrics = [n for p in sorted((run_dir / "metrics").glob("*.parquet")) for n in pq.read_table(p).column("metric").to_pylist()]
    events = [k for p in sorted((run_dir / "events").glob("*.parquet")) for k in pq.read_table(p).column("kind").to_pylist()]
    try:
        manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        manifest = {"status": f"unreadable ({type(exc).__name__})"}
    stats = manifest.get("stats") or {}
    return {"rows": {n: metrics.count(n) for n in names}, "events": {k: events.count(k) for k in sorted(set(events))},
            "status": manifest.get("status"), "degraded": manifest.get("degraded"),
            "errors": stats.get("errors"), "rejected": stats.get("rejected_values")}


def _train(run_dir: Any, **kwargs: Any) -> Path:
    import tuidiag

    rec = tuidiag.Recorder(run_dir, flush_interval=3600, **kwargs)
    for step in range(STEPS):
        rec.step(1.0 / (step + 1))
    rec.close()
    return rec.run_dir


def _deep_config(tmp: Path) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for _ in range(5000):
        config = {"a": config}
    return _summary(_train(tmp / "run", config=config))


def _circular_config(tmp: Path) -> dict[str, Any]:
    config: dict[str, Any] = {"lr": 0.1}
    config["self"] = config
    return _summary(_train(tmp / "run", config=config))


def _hostile_config(tmp: Path) -> dict[str, Any]:
    import torch

    return _summary(_train(tmp / "run", config={"t": torch.ones(3), "s": {1, 2}, 1: "x", "bad": BadRepr(), "huge": "x" * 10**7}))


def _corrupt(field: str, value: Any, resume: str | None) -> Callable[[Path], dict[str, Any]]:
    def case(tmp: Path) -> dict[str, Any]:
        import tuidiag

        run_dir = _train(tmp / "run")
        manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        manifest[field] = value
        (run_dir / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
        rec = tuidiag.Recorder(run_dir, flush_interval=3600, **({} if resume is None else {"resume": resume}))
        for i in range(STEPS):
            rec.step(0.5)
            rec.log({"new": float(i)})
        rec.close()
        return {"dir": rec.run_dir.name, **_summary(rec.run_dir, ("new",))}

    return case


def _event_data(data: Callable[[], Any]) -> Callable[[Path], dict[str, Any]]:
    def case(tmp: Path) -> dict[str, Any]:
        import tuidiag

        rec = tuidiag.Recorder(tmp / "run", flush_interval=3600)
        rec.step(1.0)
        rec.event("note", "hostile", data=data())
        for step in range(3):
            rec.event("later", f"event {step}")
            rec.step(math.nan if step == 2 else 1.0)
        rec.close()
        return _summary(rec.run_dir)

    return case


def _circular() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


def _log_hugeint(tmp: Path) -> dict[str, Any]:
    import tuidiag

    rec = tuidiag.Recorder(tmp / "run", flush_interval=3600)
    for _ in range(5):
        rec.step(1.0)
        rec.log({"c/hugeint": 10**400, "c/hugeint_ok": 1.0})
    rec.close()
    return _summary(rec.run_dir, ("c/hugeint_ok",))


def _names(tmp: Path) -> dict[str, Any]:
    import tuidiag

    rec = tuidiag.Recorder(tmp / "run", flush_interval=3600)
    for step in range(5):
        rec.log({"a?": 1.0, "a\ud800": 2.0}, step=step)
    rec.close()
    return {"series": sorted(tuidiag.open_run(rec.run_dir).metric_names), **_summary(rec.run_dir, ("a?",))}


def _bad_dir(name: bytes) -> Callable[[Path], dict[str, Any]]:
    def case(tmp: Path) -> dict[str, Any]:
        import tuidiag

        rec = tuidiag.Recorder(os.fsdecode(os.fsencode(tmp) + b"/" + name), flush_interval=3600)
        errors_at_start = rec.errors.count
        for step in range(50):
            rec.step(1.0)
        rec.close()
        return {"errors_at_start": errors_at_start, "dir": ascii(rec.run_dir.name), **_summary(rec.run_dir)}

    return case


CASES: dict[str, Callable[[Path], dict[str, Any]]] = {
    "config 5000 levels": _deep_config, "config contains itself": _circular_config, "config hostile values": _hostile_config,
    "run.json resumed=null, default": _corrupt("resumed", None, None), "run.json resumed=null, allow": _corrupt("resumed", None, "allow"),
    "run.json resumed=inf, allow": _corrupt("resumed", math.inf, "allow"),
    "run.json last_step=1e30, default": _corrupt("last_step", 10**30, None),
    "run.json last_step=1e30, allow": _corrupt("last_step", 10**30, "allow"),
    "event data tuple key": _event_data(lambda: {(1, 2): "x"}), "event data circular": _event_data(_circular),
    "log 10**400 beside a good value, x5": _log_hugeint, "names 'a?' and 'a\\ud800'": _names,
    "run dir with a non-UTF-8 byte": _bad_dir(b"bad\xff"), "run dir with a NUL": _bad_dir(b"bad\x00"),
}


def run_case(name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tuidiag-hostile-") as tmp:
        try:
            result: Any = CASES[name](Path(tmp))
        except BaseException as exc:  # what escaped into the training
            result = {"raised": f"{type(exc).__name__}: {str(exc)[:80]}"}
    print(json.dumps(result, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, help="another checkout (DIR/tuidiag) to run the same cases against")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(args.case)
        return
    sources = [("this", ROOT)] + ([("src", args.src.resolve())] if args.src else [])
    for name in CASES:
        print(name)
        for label, src in sources:
            env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
            done = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True, env=env, timeout=300)
            line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"no result (exit {done.returncode})"
            print(f"  {label:5} {line}")


if __name__ == "__main__":
    main()
