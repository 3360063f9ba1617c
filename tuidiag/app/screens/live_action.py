"""Choosing a change to apply to the live training (scale the LR, clip gradients, checkpoint)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from tuidiag.viewmodel.actions import PastAction, Proposal
from tuidiag.text.safe import literal


PROPOSALS = Binding.Group("apply the proposal with that number")


class LiveActionScreen(ModalScreen[Proposal | None]):
    """Lists the proposals; a digit applies one (the confirmation), ``esc`` cancels."""

    BINDINGS = [Binding("escape,n", "choose(0)", "Cancel", tooltip="back, nothing changes")] + [
        Binding(str(i), f"choose({i})", f"Apply {i}", show=False, group=PROPOSALS) for i in range(1, 6)
    ]
    DEFAULT_CSS = """
    LiveActionScreen { align: center middle; }
    LiveActionScreen > Vertical { width: 90; max-width: 100%; height: auto; border: thick $warning; background: $surface; padding: 0 1; }
    """

    def __init__(self, run_name: str, where: str, proposals: list[Proposal], past: tuple[PastAction, ...] = (),
                 withheld: str | None = None) -> None:
        super().__init__()
        self.run_name, self.where, self.proposals, self.past, self.withheld = run_name, where, proposals, past, withheld

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Apply a change to the live training ", style="bold")
        text.append_text(literal(self.run_name, "bold", 80))
        text.append("?\n\nIt is applied inside ")
        text.append_text(literal(self.where, "yellow", 200))
        text.append(" at its next step, and counts once the next steps show it: then it is an event and a green line "
                    "on the charts; when they do not (a scheduler or your code put the old LR back), the event says why "
                    "and the charts mark it with a column of red x.\n\n")
        if self.withheld:
            text.append("  No LR change offered: ", style="bold")
            text.append_text(literal(self.withheld, "", 300))
            text.append("\n")
        for i, proposal in enumerate(self.proposals, 1):
            text.append(f"  [{i}] ", style="bold cyan")
            text.append_text(literal(proposal.label, "", 200))
            text.append("\n")
        if self.past:
            text.append("\nEarlier changes in this run:\n", style="bold")
        for action in self.past:
            text.append("  FAILED  " if action.failed else "  applied ", style="bold red" if action.failed else "green")
            text.append_text(literal(action.message, "red" if action.failed else "", 300))
            text.append("\n")
        text.append(f"\n[1-{len(self.proposals)}] apply    [esc] cancel", style="dim")
        with Vertical():
            yield Static(text)

    def action_choose(self, index: int) -> None:
        self.dismiss(self.proposals[index - 1] if 0 < index <= len(self.proposals) else None)
