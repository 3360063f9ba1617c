"""An LR scheduler's own LR state: scaling it, so a live LR change survives the scheduler's next step.

A scheduler that computes the LR from its own numbers (``LambdaLR``'s ``base_lrs``,
``CyclicLR``'s ``max_lrs``, ``OneCycleLR``'s ``max_lr`` in the param groups, the
``eta_min`` floor of the cosine schedules, the milestone restart of ``SequentialLR``)
would put the old LR back at its next step. Scaling those numbers by the same factor
makes the whole schedule the scaled one. Only ``torch.optim.lr_scheduler`` types are
scaled; anything else is refused with the reason, before anything is changed.
"""

from __future__ import annotations

from typing import Any

FLOOR_ATTRS = ("eta_min",)
"""Scalar LR floors of the cosine schedules (one number for every group)."""
LIST_ATTRS = ("base_lrs", "max_lrs", "min_lrs")
"""Per-group LR lists: every LRScheduler's ``base_lrs``, CyclicLR's ``max_lrs``, ReduceLROnPlateau's ``min_lrs``."""


def name(scheduler: Any) -> str:
    """The scheduler's class name, with its nested schedulers (``SequentialLR(LinearLR, CosineAnnealingLR)``)."""
    inner = getattr(scheduler, "_schedulers", None)
    own = type(scheduler).__name__
    return f"{own}({', '.join(name(s) for s in inner)})" if isinstance(inner, (list, tuple)) else own


def parts(scheduler: Any) -> list[Any]:
    """The scheduler and every scheduler nested in it (SequentialLR, ChainedScheduler)."""
    inner = getattr(scheduler, "_schedulers", None)
    nested = [p for s in inner for p in parts(s)] if isinstance(inner, (list, tuple)) else []
    return [scheduler, *nested]


def problem(scheduler: Any, optimizer: Any) -> str | None:
    """Why tuidiag cannot scale ``scheduler``'s LRs reliably (None when it can)."""
    from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

    for part in parts(scheduler):
        if not isinstance(part, (LRScheduler, ReduceLROnPlateau)):
            return (f"the scheduler given to rec.watch ({name(scheduler)}) is not a torch.optim.lr_scheduler "
                    f"scheduler: tuidiag does not know where {type(part).__name__} keeps its LRs, so it cannot scale them")
        own = getattr(part, "optimizer", optimizer)  # a wrapper (Accelerate's) shares the watched one's param groups
        if own is not optimizer and getattr(own, "param_groups", None) is not optimizer.param_groups:
            return f"the scheduler given to rec.watch ({name(scheduler)}) drives another optimizer than the watched one"
    return None


def known(scheduler: Any) -> bool:
    """True when the scheduler and every nested one are ``torch.optim.lr_scheduler`` classes, whose LR
    numbers :func:`scale` knows (a subclass defined elsewhere may keep LRs of its own)."""
    return all(type(p).__module__ == "torch.optim.lr_scheduler" for p in parts(scheduler))


def _scaled(value: Any, factor: float) -> Any:
    return value * factor if isinstance(value, (int, float)) or hasattr(value, "mul_") else value


def scale(scheduler: Any, factor: float) -> list[str]:
    """Multiply every LR number ``scheduler`` (and its nested schedulers) keeps by ``factor``; returns what was scaled.

    Call :func:`problem` first: this changes whatever it finds."""
    scaled = []
    for part in parts(scheduler):
        for attr in LIST_ATTRS:
            values = getattr(part, attr, None)
            if isinstance(values, list) and values:
                setattr(part, attr, [_scaled(v, factor) for v in values])
                scaled.append(f"{type(part).__name__}.{attr}")
        for attr in FLOOR_ATTRS:
            value = getattr(part, attr, None)
            if isinstance(value, (int, float)) and value:
                setattr(part, attr, value * factor)
                scaled.append(f"{type(part).__name__}.{attr}")
    return scaled


def visible(optimizer: Any) -> bool:
    """True when a torch LR scheduler was built on ``optimizer`` (it leaves ``initial_lr`` in the
    param groups and wraps ``optimizer.step``); ReduceLROnPlateau leaves no trace, and needs none:
    it only ever multiplies the current LR."""
    groups = getattr(optimizer, "param_groups", [])
    return any("initial_lr" in g for g in groups) or hasattr(getattr(optimizer, "step", None), "_wrapped_by_lr_sched")
