"""Entry point of the ``tuidiag`` command: parses arguments and dispatches to a subcommand."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, Callable, Sequence

from tuidiag import __version__, action_kinds, job_kinds

Subcommand = tuple[str, str, str, str, str]
"""(name, help, module in ``tuidiag.cli``, its function adding the arguments, its handler)."""

SUBCOMMANDS: list[Subcommand] = [
    ("watch", "the live monitor (Textual) over a directory of runs or one run", "watch_cmd", "add_watch_arguments", "watch"),
    ("replay", "play a finished run back with a time cursor", "watch_cmd", "add_replay_arguments", "replay"),
    ("ls", "list runs with status, last step and last loss", "ls_cmd", "add_arguments", "run"),
    ("diagnose", "ranked causes of a run's problems, with evidence and fixes", "diagnose_cmd", "add_arguments", "run"),
    ("report", "write a Markdown report with plots for a run", "report_cmd", "add_arguments", "run"),
    ("compare", "compare two runs before/after a fix, with a verdict", "compare_cmd", "add_arguments", "run"),
    ("import", "import TensorBoard, Keras history or CSV logs as runs", "import_cmd", "add_arguments", "run"),
    ("query", "SQL (DuckDB) over every run's shards: views runs, metrics, events", "query_cmd", "add_arguments", "run"),
    ("status", "one line for a tmux status bar: step, loss, top finding, staleness", "status_cmd", "add_arguments", "run"),
    ("compact", "merge a finished run's small shards and write the summaries the monitor reads", "compact_cmd", "add_arguments", "run"),
    ("demo", "write demo runs from real small CPU trainings", "demo_cmd", "add_arguments", "run"),
    ("act", f"apply a change to a live training: {action_kinds.listed()}", "act_cmd", "add_arguments", "run"),
]
"""The commands other than jobs; each job kind adds its own (:func:`subcommands`)."""


def subcommands() -> list[Subcommand]:
    """Every subcommand: the fixed ones, then one per job kind (:mod:`tuidiag.job_kinds`)."""
    return SUBCOMMANDS + [(kind.command, kind.help, "jobs_cmd", "add_arguments", "run") for kind in job_kinds.kinds()]


def _load(module: str, attribute: str) -> Callable[..., Any]:
    return getattr(importlib.import_module(f"tuidiag.cli.{module}"), attribute)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered; only ``only``'s module is imported
    and its arguments added (the others are listed for ``--help``), so one command starts fast."""
    parser = argparse.ArgumentParser(
        prog="tuidiag",
        description="Record a PyTorch training's health and find out why it is failing.",
        epilog="Start with: tuidiag demo demo_runs && tuidiag ls demo_runs",
    )
    parser.add_argument("--version", action="version", version=f"tuidiag {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text, module, add_arguments, handler in subcommands():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            kind = job_kinds.find_command(name)
            adder = _load(module, add_arguments)
            adder(command, kind) if kind is not None else adder(command)
            command.set_defaults(handler=_load(module, handler))
    return parser


def safe_streams() -> None:
    """Let stdout and stderr write any text: what their encoding cannot hold (a lone surrogate,
    any non-ASCII character under ``LANG=C``) is written as a backslash escape, never an error."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a stream that cannot change now: leave it
            continue


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    safe_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    names = {entry[0] for entry in subcommands()}
    parser = build_parser(next((a for a in argv if a in names), None) if argv and not argv[0].startswith("-") else None)
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
