"""The diagnosis panel: ranked hypotheses with confidence, evidence and the fix."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tuidiag.app.widgets.guard import guarded
from tuidiag.diagnosis import Diagnosis
from tuidiag.text.findings import finding_text, labels
from tuidiag.text.safe import clean, literal

SKIPPED_SHOWN = 5
"""Files or rules the diagnosis skipped that the panel names (the count is always shown)."""
PANEL_EVIDENCE = 4
"""Evidence lines of each finding the panel shows beside the charts (the full view, ``d``, shows all)."""


class DiagnosisPanel(VerticalScroll):
    """Scrollable text of the current diagnosis; ``full`` shows every evidence line (the full-height view, ``d``)."""

    DEFAULT_CSS = """
    DiagnosisPanel { border: round $secondary; border-title-color: $text; }
    DiagnosisPanel > Static { width: 1fr; }
    """
    full = False
    """Whether every evidence line is shown (the full-height view)."""
    _shown: tuple[Diagnosis, int | None, str] | None = None
    """What ``show`` last drew: (diagnosis, step, status); None before it, or after an error."""

    def compose(self) -> ComposeResult:
        yield Static(Text("waiting for data..."), id="diagnosis-text")

    def on_mount(self) -> None:
        self.border_title = "Diagnosis"

    def set_full(self, full: bool) -> None:
        """Show every evidence line (the full-height view) or the first few (beside the charts)."""
        self.full = full
        self.border_subtitle = "d or esc: back to the charts" if full else ""
        if self._shown is not None:
            diagnosis, at, status = self._shown
            self._shown = None
            self.show(diagnosis, at, None, status)

    @guarded("the diagnosis")
    def show(self, diagnosis: Diagnosis, at: int | None = None, first_steps: dict[str, int] | None = None,
             status: str = "running") -> None:
        """Render ``diagnosis`` (as of ``at`` in replay, of a run in ``status``); nothing to do when it is the one shown."""
        if (diagnosis, at, status) == self._shown:
            return
        self._shown = (diagnosis, at, status)
        self.border_title = panel_title(diagnosis.step, at, status)
        self.query_one("#diagnosis-text", Static).update(render_diagnosis(diagnosis, None if self.full else PANEL_EVIDENCE))

    def show_error(self, text: Text) -> None:
        """Show why the diagnosis could not be drawn (the next ``show`` tries again)."""
        self._shown = None
        self.query_one("#diagnosis-text", Static).update(text)


def panel_title(step: int | None, at: int | None, status: str) -> str:
    """``Diagnosis at step N`` in replay, ``Diagnosis (live)`` while the run is running, else the run's status and the
    step diagnosed (``not diagnosed yet`` while its diagnosis runs in the background: never ``step None``)."""
    if at is not None:
        return f"Diagnosis at step {at if step is None else step}"
    if status == "running":
        return "Diagnosis (live)"
    return f"Diagnosis ({clean(status, 20)} run, {'not diagnosed yet' if step is None else f'step {step}'})"


def render_diagnosis(diagnosis: Diagnosis, max_evidence: int | None = PANEL_EVIDENCE) -> Text:
    """All findings (each with its first ``max_evidence`` evidence lines; None: all), then notes, as literal text."""
    out = Text()
    for finding, label in zip(diagnosis.findings, labels(diagnosis.findings)):
        out.append_text(finding_text(finding, label, max_evidence=max_evidence))
        out.append("\n")
    whole = max_evidence is None  # the full diagnosis (d): every note whole, with its fix
    for note in diagnosis.notes if whole else diagnosis.notes[:3]:
        out.append("Note: ", style="dim bold")
        shown = note.evidence if whole else note.evidence[:1]
        text = f"{note.title}: {'; '.join(shown)}" + (f". Fix: {note.fix}" if whole and note.fix else "")
        out.append_text(literal(text, "dim", max_len=4000 if whole else 300))
        out.append("\n")
    if diagnosis.skipped:
        out.append(f"Skipped ({len(diagnosis.skipped)}):\n", style="yellow bold")
        for item in diagnosis.skipped[:SKIPPED_SHOWN]:
            out.append_text(literal(f"  {item}", "yellow", max_len=300))
            out.append("\n")
        if len(diagnosis.skipped) > SKIPPED_SHOWN:
            more = len(diagnosis.skipped) - SKIPPED_SHOWN
            out.append(f"  ... and {more} more (tuidiag diagnose RUN lists them all)\n", style="yellow")
    return out
