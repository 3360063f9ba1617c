"""How far a run got: the one "step" that ``tuidiag ls``, ``tuidiag status`` and the monitor's overview show.

The step shown is the last *training* step: the highest step ``rec.step()`` recorded,
which the recorder writes as ``run.json``'s ``last_step``. Values logged with an
explicit step beyond it (``rec.log(..., step=11)`` in a 3-step training) do not make
the run look further on: their extent is ``run.json``'s ``last_logged_step`` and is
shown beside the step, labelled (``2 (logged to 11)``). A run that never called
``rec.step()`` (only ``rec.log``, as a ``SummaryWriter`` user does) has no other
progress than its logged steps: its step is the highest of them.

A run whose ``run.json`` does not carry ``last_logged_step`` (recorded before it
existed, imported, or another tracker's run) shows its highest recorded step, as
the reader computes it from the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LOGGED_STEP_KEY = "last_logged_step"
"""``run.json``: the highest step of any row rank 0 wrote (``last_step`` is the last training step)."""


@dataclass(frozen=True)
class Progress:
    """The step a run reached, and how far its logged values go when that is beyond it."""

    step: int | None
    """The last training step (or, without training steps, the last logged one); ``None`` before any."""
    logged_to: int | None = None
    """The highest logged step, only when it is beyond :attr:`step` (else ``None``)."""

    def text(self, grouped: bool = True) -> str:
        """``-``, ``1,234``, or ``2 (logged to 11)``; ``grouped=False``: digits without thousands separators."""
        form = ",d" if grouped else "d"
        step = "-" if self.step is None else format(self.step, form)
        return step if self.logged_to is None else f"{step} (logged to {format(self.logged_to, form)})"


def _step(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def progress(manifest: Mapping[str, Any], rows_last_step: int | None) -> Progress:
    """The progress ``run.json`` states (when it carries both steps), else the highest step of the rows read.

    ``rows_last_step``: the highest step the reader found in the rows (or, for
    ``tuidiag status``, the newest loss row's step), used when ``run.json`` says nothing.
    """
    if LOGGED_STEP_KEY not in manifest:
        return Progress(_step(manifest.get("last_step")) if rows_last_step is None else rows_last_step)
    step, logged = _step(manifest.get("last_step")), _step(manifest.get(LOGGED_STEP_KEY))
    beyond = logged is not None and (step is None or logged > step)
    return Progress(step, logged if beyond else None)
