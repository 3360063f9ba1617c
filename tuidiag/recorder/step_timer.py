"""Step time, split into waiting for data and compute, from three host timestamps (no device sync)."""

from __future__ import annotations

import time

from tuidiag.format import TIME_COMPUTE, TIME_DATA_WAIT, TIME_STEP


class StepTimer:
    """Marks ``batch()``, ``optimizer.step()`` and ``step()`` and turns them into timing metrics.

    Data wait is the time from the end of the previous iteration (its
    ``optimizer.step()`` when watched, else its ``rec.step()``) to ``rec.batch()``.
    """

    def __init__(self) -> None:
        self.t_step: float | None = None
        self.t_batch: float | None = None
        self.t_optimizer: float | None = None

    def mark_batch(self) -> None:
        """``rec.batch()`` was called: the step's compute starts."""
        self.t_batch = time.perf_counter()

    def mark_optimizer(self) -> None:
        """``optimizer.step()`` finished (from the optimizer's post-hook)."""
        self.t_optimizer = time.perf_counter()

    def step(self, now: float) -> tuple[list[str], list[float]]:
        """Metric names and values for the step ending at ``now``; then start the next one."""
        names, values = self._timing(now)
        self.t_step, self.t_batch = now, None
        return names, values

    def _timing(self, now: float) -> tuple[list[str], list[float]]:
        if self.t_step is None:
            return [], []
        step_time = now - self.t_step
        names, values = [TIME_STEP], [step_time]
        if self.t_batch is not None and self.t_batch >= self.t_step:
            after_optimizer = self.t_optimizer is not None and self.t_optimizer >= self.t_step
            wait = max(0.0, self.t_batch - (self.t_optimizer if after_optimizer else self.t_step))
            names += [TIME_DATA_WAIT, TIME_COMPUTE]
            values += [wait, step_time - wait]
        return names, values
