"""A before/after comparison as Rich text: the metrics table, the findings by code and the verdict.

One rendering for ``tuidiag compare`` and the monitor's compare screen. Every run
name, finding title and verdict passes through :func:`~tuidiag.text.safe.literal`.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tuidiag.report.compare import METHOD, Comparison, Metric
from tuidiag.text.safe import literal

OUTCOME_STYLE = {"better": "green", "worse": "red", "same": "", "n/a": "dim"}


def _num(metric: Metric, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if metric.key == "steps" else f"{value:.4g}"


def _pct(metric: Metric) -> Text:
    return Text(metric.change_text, style=OUTCOME_STYLE.get(metric.outcome, ""))


def render_table(result: Comparison) -> Table:
    """Metric | A | B | change of B vs A | verdict per metric; run names shown literally."""
    table = Table(title=Text("Before (A) vs after (B)", style="bold"), title_justify="left",
                  caption=Text(METHOD + "; change: (B - A) / |A|, signed as the value moved", style="dim"),
                  caption_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column(literal(f"A: {result.a['name']} ({result.a['status']})", max_len=60), justify="right")
    table.add_column(literal(f"B: {result.b['name']} ({result.b['status']})", max_len=60), justify="right")
    table.add_column("change B vs A", justify="right")
    table.add_column("B is")
    for metric in result.metrics:
        table.add_row(literal(metric.label), _num(metric, metric.a), _num(metric, metric.b), _pct(metric),
                      Text(result.outcome_text(metric), style=OUTCOME_STYLE.get(metric.outcome, "")))
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


def render_verdict(result: Comparison) -> Text:
    """The one-line verdict, bold."""
    return literal(result.verdict, "bold", max_len=400)


def render_comparison(result: Comparison) -> Group:
    """Table, findings and verdict, in the order ``tuidiag compare`` prints them."""
    return Group(render_table(result), render_findings(result), render_verdict(result))
