"""The diagnosis panel: ranked hypotheses with confidence, evidence and the fix."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from tuidiag.diagnosis import Diagnosis, Finding
from tuidiag.textsafe import literal

LABELS = ("Most likely", "Alternative", "Also consider")
SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold green"}


class DiagnosisPanel(VerticalScroll):
    """Scrollable text of the current diagnosis."""

    DEFAULT_CSS = """
    DiagnosisPanel { border: round $secondary; border-title-color: $text; }
    DiagnosisPanel > Static { width: 1fr; }
    """

    def compose(self):  # noqa: D102 - Textual API
        yield Static(Text("waiting for data..."), id="diagnosis-text")

    def on_mount(self) -> None:
        self.border_title = "Diagnosis"

    def show(self, diagnosis: Diagnosis, at: int | None = None, first_steps: dict[str, int] | None = None) -> None:
        """Render ``diagnosis`` (as of ``at`` in replay)."""
        self.border_title = f"Diagnosis at step {diagnosis.step}" if at is not None else "Diagnosis (live)"
        self.query_one("#diagnosis-text", Static).update(render_diagnosis(diagnosis))


def render_diagnosis(diagnosis: Diagnosis) -> Text:
    """All findings, then notes, as literal text."""
    out = Text()
    for i, finding in enumerate(diagnosis.findings):
        out.append_text(render_finding(finding, LABELS[min(i, 2)]))
        out.append("\n")
    for note in diagnosis.notes[:3]:
        out.append("Note: ", style="dim bold")
        out.append_text(literal(f"{note.title}: {'; '.join(note.evidence[:1])}", "dim", max_len=300))
        out.append("\n")
    return out


def render_finding(finding: Finding, label: str) -> Text:
    """'Most likely (80%): LR too high' with evidence lines and the fix."""
    out = Text()
    out.append(f"{label} ({finding.confidence:.0%}): ", style="bold")
    out.append_text(literal(finding.title, SEVERITY_STYLE.get(finding.severity, "")))
    if finding.first_step is not None:
        out.append(f"  since step {finding.first_step}", style="dim")
    out.append("\n")
    for line in finding.evidence[:4]:
        out.append_text(literal(f" - {line}", max_len=300))
        out.append("\n")
    if finding.code != "healthy":
        out.append("Fix: ", style="bold green")
        out.append_text(literal(finding.fix, max_len=400))
        out.append("\n")
    return out
