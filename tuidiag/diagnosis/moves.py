"""Fix moves: the settings a finding's fix changes, and in which direction (LR up, clipping tighter, ...).

Each code in :mod:`tuidiag.diagnosis.codes` lists the moves its fix may make; the
combiner compares them (:func:`tuidiag.diagnosis.combine.resolve_fix_conflicts`) so that
two findings of one diagnosis never advise opposite moves on one setting. A rule tags the
clauses of its fix text with the moves they make (:func:`fix_text`), so a conflicting
clause can be taken out; a fix given as plain text makes every move its code lists.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Move:
    """A change a fix advises: ``setting`` moved up (``direction`` +1) or down (-1)."""

    setting: str
    direction: int

    def opposes(self, other: Move) -> bool:
        """True when ``other`` moves the same setting the other way."""
        return self.setting == other.setting and self.direction != other.direction

    @property
    def doing(self) -> str:
        """The move as a gerund: ``raising the LR``."""
        return WORDS[self.setting][0 if self.direction > 0 else 1]


WORDS: dict[str, tuple[str, str]] = {
    "lr": ("raising the LR", "lowering the LR"),
    "max_norm": ("loosening gradient clipping (a higher max_norm)", "clipping gradients (a lower max_norm)"),
    "regularization": ("adding regularization", "reducing regularization"),
    "capacity": ("enlarging the model", "shrinking the model"),
    "batch_size": ("raising the batch size", "lowering the batch size"),
    "warmup": ("adding LR warmup", "shortening LR warmup"),
    "min_lr": ("raising the LR schedule's floor", "lowering the LR schedule's floor"),
    "init_scale": ("a larger init scale", "a smaller init scale"),
    "loader_workers": ("more data-loader workers", "fewer data-loader workers"),
}
"""setting -> (its up move, its down move) in words."""

LR_UP, LR_DOWN = Move("lr", 1), Move("lr", -1)
CLIP_LOOSER, CLIP_TIGHTER = Move("max_norm", 1), Move("max_norm", -1)
REG_UP, REG_DOWN = Move("regularization", 1), Move("regularization", -1)
CAPACITY_UP, CAPACITY_DOWN = Move("capacity", 1), Move("capacity", -1)
BATCH_UP = Move("batch_size", 1)
WARMUP_UP = Move("warmup", 1)
MIN_LR_UP = Move("min_lr", 1)
INIT_SMALLER = Move("init_scale", -1)
WORKERS_UP = Move("loader_workers", 1)

class FixText(str):
    """A fix's text whose clauses are tagged with the moves they make (``moves``: move -> clause)."""

    moves: dict[Move, str]

    def __new__(cls, text: str, moves: dict[Move, str]) -> FixText:
        """``text`` with its tagged clauses."""
        fix = super().__new__(cls, text)
        fix.moves = dict(moves)
        return fix

    def __reduce__(self) -> tuple[object, ...]:
        return (FixText, (str(self), self.moves))


def fix_text(*clauses: str | tuple[Move, str]) -> FixText:
    """A fix from clauses joined by ``; ``: plain text, or ``(move, text)`` for a clause that makes a move."""
    texts, moves = [], {}
    for clause in clauses:
        if isinstance(clause, tuple):
            move, text = clause
            moves[move] = text
        else:
            text = clause
        texts.append(text)
    return FixText("; ".join(texts), moves)
