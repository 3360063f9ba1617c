"""Findings as Rich text, ranked hypotheses (each cause with its confidence, evidence and fix), shared by the CLI and the monitor.

"Most likely (80%): LR too high", the evidence lines, then "Fix: ...". All text is
literal (``tuidiag.text.safe``): evidence quotes names that come from run files.
"""

from __future__ import annotations

from rich.text import Text

from tuidiag.diagnosis import Finding
from tuidiag.text.numbers import confidence
from tuidiag.text.safe import literal

RANK_LABELS = ("Most likely", "Alternative", "Also consider")
SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold green"}


def rank_label(index: int) -> str:
    """The label of the ``index``-th finding (0: most likely)."""
    return RANK_LABELS[min(index, len(RANK_LABELS) - 1)]


def finding_text(finding: Finding, label: str, indent: str = "", max_evidence: int | None = None, severity: bool = False) -> Text:
    """One hypothesis: label, confidence, title, since-step, evidence lines and the fix."""
    out = Text()
    out.append(f"{label} ({confidence(finding.confidence)}): ", style="bold")
    out.append_text(literal(finding.title, SEVERITY_STYLE.get(finding.severity, "")))
    since = [finding.severity] if severity else []
    if finding.first_step is not None:
        since.append(f"since step {finding.first_step}")
    if since:
        out.append(f"  ({', '.join(since)})", style="dim")
    out.append("\n")
    for line in finding.evidence[:max_evidence]:
        out.append_text(literal(f"{indent} - {line}", max_len=400))
        out.append("\n")
    if finding.code != "healthy":
        out.append(f"{indent}Fix: ", style="bold green")
        out.append_text(literal(finding.fix, max_len=600))
        out.append("\n")
    return out
