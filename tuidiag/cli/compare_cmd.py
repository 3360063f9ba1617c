"""``tuidiag compare RUN_A RUN_B [--json]``: before/after a fix, side by side, with a verdict."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.report.compare import METHOD, Comparison, Metric, compare_runs
from tuidiag.text.safe import literal

OUTCOME_STYLE = {"better": "green", "worse": "red", "same": "", "n/a": "dim"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``compare`` arguments."""
    parser.add_argument("run_a", metavar="RUN_A", help="the run before the fix")
    parser.add_argument("run_b", metavar="RUN_B", help="the run after the fix")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    """Print the comparison; exit 0 whatever it says, 2 when either run cannot be read."""
    try:
        run_a, run_b = load_run(args.run_a), load_run(args.run_b)
    except RunNotReadable as exc:
        return fail("compare", str(exc))
    result = compare_runs(run_a, run_b)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
    else:
        console = Console(highlight=False)
        console.print(render_table(result))
        console.print(render_findings(result))
        console.print(literal(result.verdict, "bold", max_len=400))
    return 0


def _num(metric: Metric, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if metric.key == "steps" else f"{value:.4g}"


def _pct(metric: Metric) -> Text:
    gain = metric.improvement_pct
    if gain is None:
        change = metric.change_pct
        if change is not None:
            text = f"({change:+.0f}%)"
        else:
            text = {"better": "A NaN/Inf", "worse": "B NaN/Inf"}.get(metric.outcome, "")
    else:
        text = f"{gain:+.1f}%"
    return Text(text, style=OUTCOME_STYLE.get(metric.outcome, ""))


def render_table(result: Comparison) -> Table:
    """Metric | A | B | improvement | verdict per metric; run names shown literally."""
    table = Table(title=Text("Before (A) vs after (B)", style="bold"), title_justify="left",
                  caption=Text(METHOD + "; (in parentheses): the change, where better or worse does not apply", style="dim"),
                  caption_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column(literal(f"A: {result.a['name']} ({result.a['status']})", max_len=60), justify="right")
    table.add_column(literal(f"B: {result.b['name']} ({result.b['status']})", max_len=60), justify="right")
    table.add_column("improvement of B", justify="right")
    table.add_column("B is")
    for metric in result.metrics:
        table.add_row(literal(metric.label), _num(metric, metric.a), _num(metric, metric.b), _pct(metric),
                      Text(metric.outcome, style=OUTCOME_STYLE.get(metric.outcome, "")))
    return table


def render_findings(result: Comparison) -> Text:
    """Findings by code: disappeared, appeared, persisted."""
    out = Text()
    for label, items, style in (("disappeared", result.disappeared, "green"), ("appeared", result.appeared, "red"),
                                ("persisted", result.persisted, "yellow")):
        out.append(f"Findings {label}: ", style="bold")
        if items:
            parts = [f"{f['code']} ({f['title']}{', note' if f['severity'] == 'info' else ''})" for f in items]
            out.append_text(literal(", ".join(parts), style, max_len=1000))
        else:
            out.append("none", style="dim")
        out.append("\n")
    return out
