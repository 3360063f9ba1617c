"""Entry point of the ``tuidiag`` command: parses arguments and dispatches to a subcommand."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from tuidiag import __version__
from tuidiag.cli import demo_cmd, diagnose_cmd, ls_cmd, watch_cmd
from tuidiag.cli import act_cmd, compare_cmd, jobs_cmd, report_cmd
from tuidiag.cli import import_cmd, query_cmd, status_cmd

Subcommand = tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]

SUBCOMMANDS: list[Subcommand] = [
    ("watch", "the live monitor (Textual) over a directory of runs or one run", watch_cmd.add_watch_arguments, watch_cmd.watch),
    ("replay", "play a finished run back with a time cursor", watch_cmd.add_replay_arguments, watch_cmd.replay),
    ("ls", "list runs with status, steps and last loss", ls_cmd.add_arguments, ls_cmd.run),
    ("diagnose", "ranked causes of a run's problems, with evidence and fixes", diagnose_cmd.add_arguments, diagnose_cmd.run),
    ("report", "write a Markdown report with plots for a run", report_cmd.add_arguments, report_cmd.run),
    ("compare", "compare two runs before/after a fix, with a verdict", compare_cmd.add_arguments, compare_cmd.run),
    ("import", "import TensorBoard, Keras history or CSV logs as runs", import_cmd.add_arguments, import_cmd.run),
    ("query", "SQL (DuckDB) over every run's shards: views runs, metrics, events", query_cmd.add_arguments, query_cmd.run),
    ("status", "one line for a tmux status bar: step, loss, top finding, staleness", status_cmd.add_arguments, status_cmd.run),
    ("demo", "write demo runs from real small CPU trainings", demo_cmd.add_arguments, demo_cmd.run),
    ("lr-find", "LR range test in the live training or on the run's factory: suggested LR with a chart", jobs_cmd.add_lr_find_arguments, jobs_cmd.lr_find),
    ("nan-hunt", "replay the captured NaN step and name the module and op that produced it", jobs_cmd.add_nan_hunt_arguments, jobs_cmd.nan_hunt),
    ("overfit-batch", "can the model memorise one batch? pass/fail with the loss curve", jobs_cmd.add_overfit_arguments, jobs_cmd.overfit_batch),
    ("sharpness", "flat or sharp minimum: loss increase under random weight perturbations", jobs_cmd.add_sharpness_arguments, jobs_cmd.sharpness),
    ("act", "apply a change to a live training: scale the LR, clip gradients, checkpoint now", act_cmd.add_arguments, act_cmd.run),
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="tuidiag",
        description="Record a PyTorch training's health and find out why it is failing.",
        epilog="Start with: tuidiag demo demo_runs && tuidiag ls demo_runs",
    )
    parser.add_argument("--version", action="version", version=f"tuidiag {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text, add_arguments, handler in SUBCOMMANDS:
        command = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(command)
        command.set_defaults(handler=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 0
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
