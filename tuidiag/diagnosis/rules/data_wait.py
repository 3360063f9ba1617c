"""The share of step time spent waiting for data: one definition, for the run view's strip and the rule.

The median data wait over the median step time, both over the same steps: the newest
:data:`SHARE` of the step-time series (at least :data:`MINIMUM` values, or all of them),
the data waits taken within that step range. ``data_loading_bottleneck`` quotes it as
evidence, the run view shows it as ``data wait``; both print :attr:`WaitShare.percent`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuidiag.diagnosis.evidence import Measure, measure
from tuidiag.diagnosis.rules.measures import steps_between, tail
from tuidiag.diagnosis.view import RunView

DATA_WAIT, STEP_TIME = "time/data_wait", "time/step"
SHARE = 0.3
"""The newest share of the step-time series the figure is taken over."""
MINIMUM = 20
"""At least this many step times (all of them when fewer were recorded)."""


@dataclass(frozen=True)
class WaitShare:
    """Median data wait and median step time over one window of steps."""

    wait: Measure
    step: Measure

    @property
    def share(self) -> float:
        """Data wait over step time (NaN when the step time is not positive)."""
        return self.wait.value / self.step.value if self.step.value > 0 else float("nan")

    @property
    def percent(self) -> str:
        """The share as the strip and the evidence print it: ``87%``."""
        return f"{self.share:.0%}"

    @property
    def where(self) -> str:
        """The steps the medians cover, named once when both cover the same steps."""
        return self.wait.where if self.wait.where == self.step.where else f"{self.wait.where} and {self.step.where}"


def data_wait_share(view: RunView) -> WaitShare | None:
    """The data-wait share of ``view``'s run up to its step; ``None`` without both series in the window."""
    s_steps, step = view.series(STEP_TIME)
    w_steps, wait = view.series(DATA_WAIT)
    if not len(step) or not len(wait):
        return None
    s_steps, step = tail(s_steps, step, SHARE, MINIMUM)
    w_steps, wait = steps_between(w_steps, wait, int(s_steps[0]), int(s_steps[-1]))
    if not len(wait):
        return None
    return WaitShare(measure(DATA_WAIT, w_steps, wait, "median"), measure(STEP_TIME, s_steps, step, "median"))
