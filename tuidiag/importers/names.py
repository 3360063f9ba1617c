"""The one table that maps other tools' metric names onto tuidiag's conventions.

Names are compared in a normal form (lower case, every run of ``/ - . space`` as one
``_``), so ``Loss/train``, ``loss_train`` and ``Loss-Train`` are the same name. For
each tuidiag name the aliases are listed from most to least preferred: when a source
has several (``loss`` and ``train_loss_step``), the first listed one takes the tuidiag
name and the others are kept under their own names. Every name that matches no alias
is kept as it was, made safe to show (no control characters or escapes).
``docs/import.md`` shows this table to users.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tuidiag.format import GRAD_NORM_TOTAL, LOSS, LR_PREFIX
from tuidiag.text.safe import clean

VAL_LOSS = "val/loss"
TRAIN_ACC = "train/acc"
VAL_ACC = "val/acc"
LR_GROUP0 = f"{LR_PREFIX}0"
MAX_NAME_LENGTH = 200

ALIASES: dict[str, tuple[str, ...]] = {
    LOSS: (
        "train_loss", "loss_train", "training_loss", "train_loss_step", "loss_step", "loss",
        "batch_loss", "epoch_loss", "train_epoch_loss", "train_loss_epoch", "loss_epoch",
    ),
    VAL_LOSS: (
        "val_loss", "loss_val", "validation_loss", "loss_validation", "valid_loss", "loss_valid",
        "eval_loss", "val_epoch_loss", "validation_epoch_loss", "val_loss_epoch",
    ),
    LR_GROUP0: (
        "lr", "learning_rate", "train_learning_rate", "train_lr", "epoch_learning_rate", "epoch_lr",
    ),
    GRAD_NORM_TOTAL: (
        "grad_norm_total", "grad_norm", "gradient_norm", "total_grad_norm", "train_grad_norm", "grad_2_0_norm_total",
    ),
    TRAIN_ACC: (
        "train_acc", "train_accuracy", "acc_train", "accuracy_train", "train_acc_step", "accuracy", "acc",
        "epoch_accuracy", "train_acc_epoch",
    ),
    VAL_ACC: (
        "val_acc", "val_accuracy", "acc_val", "accuracy_val", "validation_accuracy", "valid_acc", "eval_accuracy",
        "eval_acc", "val_epoch_accuracy", "validation_epoch_accuracy", "val_acc_epoch",
    ),
}
"""tuidiag name -> aliases in normal form, most preferred first."""

LR_GROUP = re.compile(r"^lr_group(\d+)$")
"""tuidiag's own ``lr/group<i>``."""
LIGHTNING_LR = re.compile(r"^lr_[a-z][a-z0-9]*(?:_pg(\d+))?$")
"""Lightning's ``LearningRateMonitor``: ``lr-Adam``, and ``lr-Adam/pg1``, ``lr-Adam/pg2`` per param group (from 1)."""

_SEPARATORS = re.compile(r"[/\-.\s]+")


def normal_form(name: str) -> str:
    """``name`` in the form the alias table uses: lower case, separators as one ``_``."""
    return _SEPARATORS.sub("_", name.strip().lower()).strip("_")


def safe_name(name: str) -> str:
    """A source name fit to store and show: no escapes or control characters, bounded, never empty."""
    text = clean(name, MAX_NAME_LENGTH).strip()
    return text or "unnamed"


@dataclass
class NameMap:
    """Where each source name goes: ``mapped`` onto a tuidiag name, or ``kept`` under its own (safe) name."""

    mapped: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)

    def target(self, source: str) -> str:
        """The metric name a source name is stored under."""
        return self.mapped.get(source) or self.kept[source]


def _candidates(source: str) -> list[tuple[str, int]]:
    """(tuidiag name, rank) pairs that ``source`` is an alias of; lower rank is preferred."""
    norm = normal_form(source)
    found = [(target, aliases.index(norm)) for target, aliases in ALIASES.items() if norm in aliases]
    if (group := LR_GROUP.match(norm)) is not None:
        found = [(f"{LR_PREFIX}{int(group.group(1))}", 0)]
    elif not found and (lightning := LIGHTNING_LR.match(norm)) is not None:
        index = int(lightning.group(1)) - 1 if lightning.group(1) else 0
        found = [(f"{LR_PREFIX}{max(index, 0)}", 100)]
    return [(target, -1 if source == target else rank) for target, rank in found]


def map_names(sources: list[str]) -> NameMap:
    """Map every source name: the most preferred alias of each tuidiag name wins it, the rest are kept."""
    best: dict[str, tuple[int, str]] = {}
    for source in sources:
        for target, rank in _candidates(source):
            if target not in best or rank < best[target][0]:
                best[target] = (rank, source)
    result = NameMap()
    winners = {source: target for target, (_, source) in best.items()}
    taken = set(winners.values())
    for source in sources:
        if source in winners:
            result.mapped[source] = winners[source]
        else:
            result.kept[source] = _unused(safe_name(source), taken)
            taken.add(result.kept[source])
    return result


def _unused(name: str, taken: set[str]) -> str:
    """``name``, or ``name#2``, ``name#3``... when another series already has it."""
    if name not in taken:
        return name
    n = 2
    while f"{name}#{n}" in taken:
        n += 1
    return f"{name}#{n}"
