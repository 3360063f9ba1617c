"""Editing a finding's fix: one clause taken out, with the reason said in its place.

Used where other evidence rules a move out: the combiner, when a better-supported finding advises the
opposite move (:func:`tuidiag.diagnosis.combine.resolve_fix_conflicts`), and a job's result that
contradicts a clause (:mod:`tuidiag.diagnosis.job_evidence`). Pure: the finding given is left as it was.
"""

from __future__ import annotations

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.lr_target import unled
from tuidiag.diagnosis.moves import Move


def drop_move(finding: Finding, move: Move, note: str | None) -> Finding:
    """``finding`` anew without ``move``'s clause in its fix, ending with ``note`` (why the clause went; ``None``: nothing
    said, for a clause another finding's fix makes instead)."""
    moves = dict(finding.moves)
    clause = moves.pop(move)
    for other, text in list(moves.items()):
        if text == clause:  # an untagged fix: its one clause made every move
            moves.pop(other)
    parts = [p for p in (str(finding.fix).replace(clause, "", 1) if clause else str(finding.fix)).split("; ") if p.strip(" ;")]
    if parts and parts[0].startswith("or "):  # "or reduce LR ..." now leads: its move's clause loses the "or" too
        moves = {other: unled(text) if text == parts[0] else text for other, text in moves.items()}
        parts[0] = parts[0][3:]
    return finding.changed(fix="; ".join([*parts, *([note] if note else [])]), moves=moves)


def lead_with(finding: Finding, lead: str) -> Finding:
    """``finding`` anew with ``lead`` (words without ``; ``, ending where the first clause begins) before its fix's
    first clause, that clause's move kept on it."""
    parts = str(finding.fix).split("; ")
    first = lead + parts[0]
    moves = {move: first if text == parts[0] else text for move, text in finding.moves.items()}
    return finding.changed(fix="; ".join([first, *parts[1:]]), moves=moves)
