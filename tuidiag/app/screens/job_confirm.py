"""Asking before a job runs code that a run directory names (its factory)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from tuidiag import job_kinds
from tuidiag.text.safe import literal


class JobConfirmScreen(ModalScreen[bool]):
    """Shows the exact command and the factory it imports; ``y`` runs it, ``esc`` cancels."""

    BINDINGS = [Binding("y", "answer(True)", "Run it", tooltip="start the job (x in the run view cancels it)"),
                Binding("escape,n", "answer(False)", "Cancel", tooltip="back, nothing runs")]
    DEFAULT_CSS = """
    JobConfirmScreen { align: center middle; }
    JobConfirmScreen > Vertical { width: 90; max-width: 100%; height: auto; max-height: 100%; overflow-y: auto;
                                  border: thick $warning; background: $surface; padding: 0 1; }
    #confirm-keys { dock: bottom; }
    """
    # the keys are docked: on a terminal too small for the whole text it scrolls, and the keys stay in sight

    def __init__(self, job: str, command: str, factory: str, where: str, live: str | None = None) -> None:
        super().__init__()
        self.job, self.command, self.factory, self.where, self.live = job, command, factory, where, live

    def compose(self) -> ComposeResult:
        text = Text()
        kind = job_kinds.find(self.job)
        text.append(f"Run {kind.title if kind is not None else self.job}?\n\n", style="bold")
        if self.live is not None:
            text.append("It runs inside ")
            text.append_text(literal(self.live, "bold yellow", 1000))  # whole: it says how long and when it stops
            text.append(".\nIt starts at the training's next step, on its device and recent batches; no code is imported.\n"
                        "Model, optimizer and RNG are restored, so training goes on as before.\n\n"
                        "The monitor sends the request itself, as this command would:\n  ")
        else:
            text.append("It imports and runs the factory named by the run directory:\n  ")
            text.append_text(literal(self.factory, "bold yellow", 200))
            text.append("\non ")
            text.append_text(literal(self.where))
            text.append(" (CUDA when available), restoring model, optimizer and RNG afterwards.\n\nCommand:\n  ")
        text.append_text(literal(self.command, "cyan", 600))
        text.append("\n")
        with Vertical():
            yield Static(Text("[y] run it    [esc] cancel    (x cancels a running job)", style="dim"), id="confirm-keys")
            yield Static(text)

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
