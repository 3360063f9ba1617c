"""How a job is driven and how it fails: progress and cancellation (:class:`JobHandle`), and its errors.

Torch-free, so that callers that only follow a job need not import torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tuidiag.job_kinds.kind import JobError  # noqa: F401  (defined with the job kinds; re-exported)


class JobCancelled(Exception):
    """The job was cancelled through its :class:`JobHandle`; state is restored as after any failure."""


def _never() -> bool:
    return False


def _ignore(done: int, total: int) -> None:
    return None


@dataclass
class JobHandle:
    """How a caller follows and stops a job: the seam for the monitor's progress and cancel key.

    ``progress(done, total)`` is called after each unit of work; a job checks
    ``cancelled()`` at the same points and raises :class:`JobCancelled` when it returns True.
    """

    progress: Callable[[int, int], None] = field(default=_ignore)
    cancelled: Callable[[], bool] = field(default=_never)

    def tick(self, done: int, total: int) -> None:
        """Report progress, then stop the job if it was cancelled."""
        self.progress(done, total)
        if self.cancelled():
            raise JobCancelled(f"cancelled after {done} of {total}")
