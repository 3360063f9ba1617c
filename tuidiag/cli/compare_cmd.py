"""``tuidiag compare RUN_A RUN_B [--json]``: before/after a fix, side by side, with a verdict."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.report.compare import compare_runs
from tuidiag.text.comparison import render_comparison


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``compare`` arguments."""
    parser.add_argument("run_a", metavar="RUN_A", help="the run before the fix")
    parser.add_argument("run_b", metavar="RUN_B", help="the run after the fix")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    """Print the comparison; exit 0 whatever it says, 2 when either run cannot be read."""
    try:
        run_a, run_b = load_run(args.run_a, foreign=True), load_run(args.run_b, foreign=True)
    except RunNotReadable as exc:
        return fail("compare", str(exc))
    result = compare_runs(run_a, run_b)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
    else:
        Console(highlight=False).print(render_comparison(result))
    return 0
