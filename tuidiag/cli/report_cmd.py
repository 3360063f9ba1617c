"""``tuidiag report RUN [-o DIR]``: a Markdown report with plots, readable without the monitor."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.store.report_place import default_report_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``report`` arguments."""
    parser.add_argument("run", help="a run directory")
    parser.add_argument("-o", "--out", metavar="DIR", help="where to write report.md and the PNG plots (default: RUN/report; for a read-only run, tuidiag's cache)")


def run(args: argparse.Namespace) -> int:
    """Write the report (into the run; into the cache for a read-only run) and print its path;
    exit 2 when the run cannot be read or the report written."""
    try:
        run_ = load_run(args.run)
    except RunNotReadable as exc:
        return fail("report", str(exc))
    from tuidiag.report import write_report  # imports matplotlib only when a report is made

    out, cached = (Path(args.out), False) if args.out else default_report_dir(run_.path)
    try:
        path = write_report(run_, out)
    except OSError as exc:
        return fail("report", f"cannot write the report to {out}: {exc}")
    if cached:  # said on stderr: stdout stays the report's path alone, for scripts
        print(f"tuidiag report: {run_.path} is read-only, so the report is kept in the cache (-o DIR to choose)",
              file=sys.stderr)
    print(path)
    return 0
