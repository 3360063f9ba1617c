"""``tuidiag demo DIR``: write demo runs by training small real models on the CPU."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``demo`` arguments."""
    parser.add_argument("path", nargs="?", default="demo_runs", help="where to write the runs (default: ./demo_runs)")
    parser.add_argument("--only", action="append", metavar="NAME", help="train only this scenario (repeatable)")
    parser.add_argument("--live", action="store_true", help="keep one training running and writing until Ctrl-C")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: each scenario's own; with --live: forever)")
    parser.add_argument("--pace", type=float, default=0.05, help="with --live: seconds to sleep per step (default 0.05)")
    parser.add_argument("--force", action="store_true", help="replace runs that already exist")


def run(args: argparse.Namespace) -> int:
    """Train the chosen scenarios; exit 2 when torch is missing or a name is unknown."""
    from tuidiag.cli.torch_hint import refuse_without_torch

    if refuse_without_torch("demo"):
        return 2
    from tuidiag.demo import scenarios
    from tuidiag.store.job_results import mark_read_only

    root = Path(args.path)
    try:
        chosen = [scenarios.by_name(n) for n in args.only] if args.only else list(scenarios.SCENARIOS)
    except KeyError as exc:
        print(f"tuidiag demo: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.live:
        return _live(scenarios, chosen[0] if args.only else scenarios.by_name("healthy"), root, args)
    for scenario in chosen:
        target = root / scenario.name
        if target.exists():
            if not args.force:
                print(f"{target} exists, skipped (use --force to replace)")
                continue
            shutil.rmtree(target)
        print(f"training {scenario.name}: {scenario.shows}", flush=True)
        try:
            scenarios.train(scenario, target, steps=args.steps)
        except FloatingPointError as exc:
            print(f"  stopped as intended: {exc}")
        mark_read_only(target)  # an example to look at: jobs run on it keep their results in the cache
    print(f"done: tuidiag ls {root}")
    return 0


def _live(scenarios, scenario, root: Path, args: argparse.Namespace) -> int:
    target = root / f"live-{scenario.name}"
    if target.exists():
        shutil.rmtree(target)
    print(f"live training {scenario.name} into {target}; watch it from another pane; Ctrl-C stops it", flush=True)
    try:
        scenarios.train(scenario, target, steps=args.steps if args.steps is not None else 0, pace=args.pace)
    except (KeyboardInterrupt, FloatingPointError) as exc:
        print(f"stopped: {type(exc).__name__}")
    return 0
