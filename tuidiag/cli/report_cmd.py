"""``tuidiag report RUN [-o DIR]``: a Markdown report with plots, readable without the monitor."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``report`` arguments."""
    parser.add_argument("run", help="a run directory")
    parser.add_argument("-o", "--out", metavar="DIR", help="where to write report.md and the PNG plots (default: RUN/report)")


def run(args: argparse.Namespace) -> int:
    """Write the report and print its path; exit 2 when the run cannot be read or the report written."""
    try:
        run_ = load_run(args.run)
    except RunNotReadable as exc:
        return fail("report", str(exc))
    from tuidiag.report import write_report  # imports matplotlib only when a report is made

    out = Path(args.out) if args.out else run_.path / "report"
    try:
        path = write_report(run_, out)
    except OSError as exc:
        return fail("report", f"cannot write the report to {out}: {exc}")
    print(path)
    return 0
