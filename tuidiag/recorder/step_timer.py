"""Step time, split into waiting for data and compute, from host timestamps (no device sync).

Data wait is the time a step's batches took to arrive after the previous use ended:

- the step's first batch (``rec.batch()``): from the end of the previous iteration (its
  ``optimizer.step()`` when watched, else its ``rec.step()``);
- each further batch of the same step (gradient accumulation: several batches, one
  optimizer step): from the end of the previous batch's backward pass, which the watch
  marks once it has seen a step with more than one batch (:meth:`StepTimer.wants_use_marks`).
  Without that mark the time since the previous batch holds its forward and backward
  passes too, so it is not counted as waiting: the wait is never overstated.
"""

from __future__ import annotations

import time

from tuidiag.format import TIME_COMPUTE, TIME_DATA_WAIT, TIME_STEP


class StepTimer:
    """Marks ``batch()``, the end of each backward pass, ``optimizer.step()`` and ``step()``; turns them into timing metrics."""

    def __init__(self) -> None:
        self.t_step: float | None = None
        self.t_batch: float | None = None
        """When the newest batch of the current step arrived (``None``: none yet)."""
        self.t_optimizer: float | None = None
        self.t_used: float | None = None
        """When the newest backward pass ended (from the watch's gradient hooks, once installed)."""
        self.wait: float = 0.0
        """Data wait of the current step so far."""
        self.several_batches = False
        """A step had more than one batch: the watch should mark where each backward pass ends."""

    def mark_batch(self) -> None:
        """``rec.batch()`` was called: a batch arrived."""
        now = time.perf_counter()
        if self.t_step is not None:
            if self.t_batch is None:  # the step's first batch
                after_optimizer = self.t_optimizer is not None and self.t_optimizer >= self.t_step
                self.wait += max(0.0, now - (self.t_optimizer if after_optimizer and self.t_optimizer is not None else self.t_step))
            elif self.t_used is not None and self.t_used >= self.t_batch:  # a further batch, after the last one's backward
                self.wait += max(0.0, now - self.t_used)
        if self.t_batch is not None:
            self.several_batches = True
        self.t_batch = now

    def mark_used(self) -> None:
        """A backward pass finished (called from the watch's gradient hooks): the batch it used is done with."""
        self.t_used = time.perf_counter()

    def mark_optimizer(self) -> None:
        """``optimizer.step()`` finished (from the optimizer's post-hook)."""
        self.t_optimizer = time.perf_counter()

    def step(self, now: float) -> tuple[list[str], list[float]]:
        """Metric names and values for the step ending at ``now``; then start the next one."""
        names, values = self._timing(now)
        self.t_step, self.t_batch, self.wait = now, None, 0.0
        return names, values

    def _timing(self, now: float) -> tuple[list[str], list[float]]:
        if self.t_step is None:
            return [], []
        step_time = now - self.t_step
        names, values = [TIME_STEP], [step_time]
        if self.t_batch is not None:
            wait = min(self.wait, step_time)
            names += [TIME_DATA_WAIT, TIME_COMPUTE]
            values += [wait, step_time - wait]
        return names, values
