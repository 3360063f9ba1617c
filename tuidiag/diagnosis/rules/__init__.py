"""The diagnosis rules: small pure functions ``rule(view) -> Finding | None``, one code each."""

from tuidiag.diagnosis.rules import (
    activations, batch_order, coverage, data, generalization, gradients, loss, lr, lr_schedule, ranks, recording, review, silent_bugs, system,
)

RULES = [
    *loss.RULES,
    *lr.RULES,
    *lr_schedule.RULES,
    *gradients.RULES,
    *generalization.RULES,
    *activations.RULES,
    *data.RULES,
    *silent_bugs.RULES,
    *batch_order.RULES,
    *system.RULES,
    *ranks.RULES,
    *review.RULES,
    *recording.RULES,
    *coverage.RULES,
]

__all__ = ["RULES"]
