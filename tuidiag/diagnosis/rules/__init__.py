"""The diagnosis rules: small pure functions ``rule(view) -> Finding | None``, one code each."""

from tuidiag.diagnosis.rules import (
    activations, coverage, data, generalization, gradients, loss, lr, ranks, recording, review, silent_bugs, system,
)

RULES = [
    *loss.RULES,
    *lr.RULES,
    *gradients.RULES,
    *generalization.RULES,
    *activations.RULES,
    *data.RULES,
    *silent_bugs.RULES,
    *system.RULES,
    *ranks.RULES,
    *review.RULES,
    *recording.RULES,
    *coverage.RULES,
]

__all__ = ["RULES"]
