"""Findings as Rich text, ranked hypotheses (each cause with its confidence, evidence and fix), shared by the CLI and the monitor.

"Most likely (80%): LR too high", the evidence lines, then "Fix: ...". All text is
literal (``tuidiag.text.safe``): evidence quotes names that come from run files.

A finding that a higher-ranked cause explains (its code is in the cause's ``related``: the
NaN loss, the exploding gradients, the dead units an LR too high produced) is a symptom
seen in the data, not a rival cause: it is headed "Observed symptom of <cause>" with no
percentage, since its discounted confidence would read as doubt about an observed fact. A
cause whose shown percentage equals the one above it is headed "Equally likely", so two
causes never read as "Most likely (96%)" and "Alternative (96%)".
"""

from __future__ import annotations

from rich.text import Text

from tuidiag.diagnosis import Finding
from tuidiag.text.numbers import confidence
from tuidiag.text.safe import literal

RANK_LABELS = ("Most likely", "Alternative", "Also consider")
SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold green"}


def rank_label(index: int) -> str:
    """The label of the ``index``-th ranked cause (0: most likely)."""
    return RANK_LABELS[min(index, len(RANK_LABELS) - 1)]


OBSERVED = "Observed symptom of "
"""The start of the label of a symptom a higher-ranked cause explains."""
EQUAL = "Equally likely"
"""The label of a cause whose shown confidence equals the one ranked above it."""


def labels(findings: list[Finding]) -> list[str]:
    """Each finding's label, in order: ranked causes (a tie with the one above reads :data:`EQUAL`), and
    symptoms that an earlier finding explains (:data:`OBSERVED` and that finding's title)."""
    out: list[str] = []
    shown: list[str] = []
    for i, finding in enumerate(findings):
        cause = next((c for c in findings[:i] if finding.code in c.related), None)
        if cause is not None:
            out.append(OBSERVED + cause.title)
            continue
        share = confidence(finding.confidence)
        out.append(EQUAL if shown and shown[-1] == share else rank_label(len(shown)))
        shown.append(share)
    return out


def heading(finding: Finding, label: str) -> str:
    """``Most likely (80%)``; an observed symptom's label as it is, without a percentage."""
    return label if label.startswith(OBSERVED) else f"{label} ({confidence(finding.confidence)})"


def finding_text(finding: Finding, label: str, indent: str = "", max_evidence: int | None = None, severity: bool = False) -> Text:
    """One hypothesis: label (from :func:`labels`), confidence, title, since-step, evidence lines and the fix."""
    out = Text()
    out.append(f"{heading(finding, label)}: ", style="bold")
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
