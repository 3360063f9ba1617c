"""``tuidiag diagnose RUN [--json] [--at STEP]``: ranked causes with evidence and fixes."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.text import Text

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.diagnosis import Diagnosis, diagnose
from tuidiag.store.job_results import job_records
from tuidiag.store.progress import progress
from tuidiag.text.findings import finding_text, labels
from tuidiag.text.safe import literal



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``diagnose`` arguments."""
    parser.add_argument("run", help="a run directory")
    parser.add_argument("--json", action="store_true", help="print the JSON contract (docs: shared diagnosis codes)")
    parser.add_argument("--at", type=int, metavar="STEP", help="diagnose as of this step (what was known then)")


def run(args: argparse.Namespace) -> int:
    """Print the diagnosis; exit 0 whatever is found, 2 when the run cannot be read."""
    try:
        run_ = load_run(args.run, foreign=True)
    except RunNotReadable as exc:
        return fail("diagnose", str(exc))
    result = diagnose(run_, at=args.at, jobs=job_records(run_))
    if args.json:
        print(json.dumps(result.to_json(), indent=2, default=str))
    else:
        reached = progress(run_.manifest, run_.last_step).text() if args.at is None else None  # as ls says it
        Console(highlight=False).print(render(result, run_.status, reached))
    return 0


def render(result: Diagnosis, status: str, step_text: str | None = None) -> Text:
    """The diagnosis as plain, literal text: ranked hypotheses, each cause with its confidence, evidence and fix.

    ``step_text``: the run's step as ``tuidiag ls`` shows it (default: the diagnosis's own step)."""
    out = Text()
    heading = f"Diagnosis of {result.run} at step {step_text or result.step} ({status})"
    out.append_text(literal(heading, "bold", max_len=200))
    out.append("\n" + "=" * min(len(heading), 78) + "\n")
    for finding, label in zip(result.findings, labels(result.findings)):
        out.append("\n")
        out.append_text(finding_text(finding, label, indent="  ", severity=True))
    if result.notes:
        out.append("\nNotes (review of the setup, not alarms):\n", style="bold")
        for note in result.notes:
            out.append_text(literal(f"  - {note.title}: {'; '.join(note.evidence)}. {note.fix}", max_len=4000))
            out.append("\n")
    if result.skipped:
        out.append("\nSkipped:\n", style="bold")
        for item in result.skipped:
            out.append_text(literal(f"  - {item}"))
            out.append("\n")
    return out
