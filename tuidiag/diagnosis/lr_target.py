"""One LR target per diagnosis: every fix that moves the LR names the same new value.

Rules word their LR clauses on their own (lr_too_high 10x lower, exploding gradients and
dead ReLUs 3x lower, the LR finder its suggestion), so one diagnosis could advise "about
0.03" and "about 0.09" side by side. After the combiner has settled the direction of each
setting (:func:`tuidiag.diagnosis.combine.resolve_fix_conflicts`), :func:`one_lr_target`
takes the target of the strongest evidence, the LR finder's suggestion where a fix uses it,
else the highest-ranked finding that names a number, and writes it into every other LR
clause of that direction.
"""

from __future__ import annotations

import re

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.moves import LR_DOWN, LR_UP, Move

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
TARGET = re.compile(rf"(?P<lead>\bto (?:about )?)(?P<value>{_NUMBER})(?![\w.])")
"""The new LR in a clause: ``to about 0.03``, ``to 3e-4``."""
RELATIVE = re.compile(r"(?P<lead>\bby about )(?P<value>\d+)(?=x)")
"""The step in a clause that names no LR (the current LR unknown): ``by about 10x``."""
FINDER = "(LR finder)"
"""The words of a clause that carries the LR finder's suggestion (:mod:`tuidiag.diagnosis.job_evidence`)."""


def _source(findings: list[Finding], move: Move, pattern: re.Pattern[str]) -> str | None:
    """The target, as worded, of the strongest evidence for ``move``: the LR finder's clause, else the first finding's."""
    clauses = [f.moves[move] for f in findings if move in f.moves and pattern.search(f.moves[move])]
    chosen = next((c for c in clauses if FINDER in c), clauses[0] if clauses else None)
    match = pattern.search(chosen) if chosen is not None else None
    return match.group("value") if match else None


def _retarget(finding: Finding, move: Move, pattern: re.Pattern[str], value: str) -> Finding:
    """``finding`` anew with ``move``'s clause naming ``value`` as its target (unchanged when it names none or that one)."""
    old = finding.moves[move]
    new = pattern.sub(lambda m: m.group("lead") + value, old, count=1)
    shown = old if old in str(finding.fix) else old.removeprefix("or ")  # the combiner drops a leading "or" it left first
    if new == old or shown not in str(finding.fix):
        return finding
    moves = {other: new if clause == old else clause for other, clause in finding.moves.items()}
    return finding.changed(fix=str(finding.fix).replace(shown, pattern.sub(lambda m: m.group("lead") + value, shown, count=1), 1),
                           moves=moves)


def one_lr_target(findings: list[Finding]) -> list[Finding]:
    """``findings`` anew, in the same order (alarms ranked first, then notes), with every LR clause of one direction
    naming one target: the LR finder's suggestion where a fix carries it, else the highest-ranked finding's
    (the findings given are left as they were)."""
    current = list(findings)
    for move in (LR_DOWN, LR_UP):
        for pattern in (TARGET, RELATIVE):
            value = _source(current, move, pattern)
            if value is None:
                continue
            current = [_retarget(f, move, pattern, value) if move in f.moves else f for f in current]
    return current
