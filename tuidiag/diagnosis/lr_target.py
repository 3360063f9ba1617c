"""LR moves as structure: every fix clause that moves the LR is rendered from an :class:`LRMove`, and one
diagnosis names one target LR.

A rule that advises an LR change says how (:func:`scaled`: the current LR times a factor; the
LR finder's suggestion: :func:`finder_suggests`, :func:`finder_capped`) and gets an
:class:`LRClause`, the clause's text rendered from its move and carrying it. Rules scale the
LR on their own (lr_too_high 10x lower, exploding gradients and dead ReLUs 3x lower), so
after the combiner has settled the direction of each setting
(:func:`tuidiag.diagnosis.combine.resolve_fix_conflicts`), :func:`one_lr_target` takes the
target of the strongest evidence (the LR finder's suggestion where a fix carries it, else
the highest-ranked finding's that names a number) and renders every other LR clause of that
direction anew with it. No fix text is parsed: the numbers come from the moves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.moves import LR_DOWN, LR_UP, Move
from tuidiag.text.numbers import fmt

FINDER = "(LR finder)"
"""The words of a clause that carries the LR finder's suggestion."""


@dataclass(frozen=True)
class LRMove:
    """An LR change a fix advises, from which its clause is rendered."""

    move: Move
    """:data:`~tuidiag.diagnosis.moves.LR_DOWN` or :data:`~tuidiag.diagnosis.moves.LR_UP`."""
    verb: str
    """``reduce``, ``lower``, ``raise``, ``set``."""
    current: float | None = None
    """The LR now (``None``: unknown)."""
    target: float | None = None
    """The LR advised (``None``: a relative step only, or no number at all)."""
    step: float | None = None
    """The factor advised when no LR can be named (0.1: 10x lower), or the LR finder's cap."""
    note: str = ""
    """Words after the change, with their own separator: ``" (3-10x lower)"``."""
    lead: str = ""
    """Words before it, in a fix that offers another move first: ``"or "``."""
    finder: bool = False
    """Whether the LR finder's suggestion is the target."""

    @property
    def names_change(self) -> bool:
        """Whether the clause names a number (a target or a step): one it can share with the others."""
        return self.target is not None or self.step is not None

    def text(self) -> str:
        """The clause: ``reduce LR from 0.3 to about 0.03 (3-10x lower)``, ``set LR to about 0.01 (LR finder), from 0.3``."""
        words = f"{self.lead}{self.verb} LR"
        if self.finder and self.step is not None and self.target is not None and self.current is not None:
            words += f" {_times(self.step)}x {FINDER}, from {fmt(self.current)} to {fmt(self.target)}"
        elif self.finder and self.target is not None and self.current is not None:
            words += f" to about {fmt(self.target)} {FINDER}, from {fmt(self.current)}"
        elif self.target is not None:
            words += f" from {fmt(self.current)} to about {fmt(self.target)}" if self.current is not None else f" to about {fmt(self.target)}"
        elif self.step is not None:
            words += f" by about {_times(self.step)}x"
        return words + self.note

    def aimed_at(self, source: LRMove) -> LRMove:
        """This move with ``source``'s target (or step, when it names no LR); the finder's own, and a clause that
        names no number, as they are."""
        if self.finder or not self.names_change:
            return self
        if source.target is not None:
            return replace(self, target=source.target, step=None)
        return replace(self, step=source.step)


def _times(step: float) -> str:
    return f"{1 / step:.0f}" if step < 1 else f"{step:.0f}"


class LRClause(str):
    """A fix clause that moves the LR: the text of its :class:`LRMove` (``lr``), which it carries."""

    lr: LRMove

    def __new__(cls, lr: LRMove) -> LRClause:
        """The clause of ``lr``."""
        clause = super().__new__(cls, lr.text())
        clause.lr = lr
        return clause

    def __reduce__(self) -> tuple[object, ...]:
        return (LRClause, (self.lr,))


def scaled(move: Move, verb: str, lr_now: float | None, factor: float, note: str = "", lead: str = "") -> tuple[Move, LRClause]:
    """``(move, clause)`` for :func:`~tuidiag.diagnosis.moves.fix_text`: the current LR times ``factor``
    (``from 0.3 to about 0.03``), or the step alone when the LR is unknown (``by about 10x``)."""
    known = lr_now if lr_now is not None and lr_now > 0 else None
    lr = LRMove(move, verb, known, known * factor if known is not None else None, None if known is not None else factor, note, lead)
    return move, LRClause(lr)


def plain(move: Move, verb: str, note: str = "") -> tuple[Move, LRClause]:
    """``(move, clause)``: an LR change that names no number (``reduce LR``)."""
    return move, LRClause(LRMove(move, verb, note=note))


def finder_suggests(move: Move, suggested: float, current: float) -> LRClause:
    """The LR finder's suggestion as the clause: ``set LR to about 0.01 (LR finder), from 0.3``."""
    return LRClause(LRMove(move, "set", current, suggested, finder=True))


def finder_capped(move: Move, current: float, factor: float, note: str = "") -> LRClause:
    """The LR finder's direction, its step capped at ``factor``: ``reduce LR 10x (LR finder), from 0.3 to 0.03``."""
    target = current * factor if move == LR_UP else current / factor
    return LRClause(LRMove(move, "raise" if move == LR_UP else "reduce", current, target, factor, note, finder=True))


def unled(clause: str) -> str:
    """``clause`` without its leading ``or `` (the combiner takes it off a clause that came to lead its fix)."""
    if isinstance(clause, LRClause):
        return LRClause(replace(clause.lr, lead=""))
    return clause[3:] if clause.startswith("or ") else clause


def _source(findings: list[Finding], move: Move) -> LRMove | None:
    """The move whose number every LR clause of ``move``'s direction names: the LR finder's, else the first
    finding's that names an LR, else the first's that names a step."""
    moves = [c.lr for f in findings if isinstance(c := f.moves.get(move), LRClause) and c.lr.names_change]
    named = [m for m in moves if m.target is not None]
    return next((m for m in named if m.finder), named[0] if named else moves[0] if moves else None)


def _aimed(finding: Finding, move: Move, source: LRMove) -> Finding:
    """``finding`` anew with ``move``'s clause rendered for ``source``'s target (unchanged when it names none or that one)."""
    old = finding.moves.get(move)
    if not isinstance(old, LRClause) or old not in str(finding.fix):
        return finding
    new = LRClause(old.lr.aimed_at(source))
    if new == old:
        return finding
    moves = {other: new if clause == old else clause for other, clause in finding.moves.items()}
    return finding.changed(fix=str(finding.fix).replace(old, new, 1), moves=moves)


def one_lr_target(findings: list[Finding]) -> list[Finding]:
    """``findings`` anew, in the same order (alarms ranked first, then notes), with every LR clause of one direction
    naming one target: the LR finder's suggestion where a fix carries it, else the highest-ranked finding's
    (the findings given are left as they were)."""
    current = list(findings)
    for move in (LR_DOWN, LR_UP):
        source = _source(current, move)
        if source is not None:
            current = [_aimed(f, move, source) for f in current]
    return current
