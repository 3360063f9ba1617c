"""What the NaN hunt's replay finds: the ops through which non-finite values entered (origins) and the culprits.

Filled in by :class:`tuidiag.jobs.nan_trace.Tracer` and reported by :mod:`tuidiag.jobs.nan_hunt`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Origin:
    """An op through which non-finite values entered the forward pass.

    ``new`` counts the elements it created per kind (:mod:`tuidiag.jobs.nonfinite_rule`);
    empty when it only passed in a non-finite value from an argument (by design).
    """

    index: int
    op: str
    aten: str
    module: str
    produced: str
    new: dict[str, int]
    stack: list[str]

    @property
    def created(self) -> bool:
        """True when the op created the value, False when it took it from an argument."""
        return bool(self.new)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"op": self.op, "aten": self.aten, "module": self.module, "produced": self.produced,
                "created": self.created, "new": dict(self.new), "stack": self.stack}


@dataclass
class Hit:
    """The first culprit of one pass: a module (or the loss function) and the evidence."""

    module: str
    module_type: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ForwardCulprit:
    """The forward pass's answer: the culprit origin, its module, and every origin that reached the loss."""

    hit: Hit
    origin: Origin
    reached: list[Origin]
    traced: bool
