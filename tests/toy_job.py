"""A toy job added through the job registry alone (``tuidiag.job_kinds.register``): no other table is edited.

It counts ``steps`` units of work, reporting each one; after the first it waits on
:data:`GATE`, so that a test sees it running at a known point. Its runner and renderer
are named by ``"module:function"`` like the built-in jobs'.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tuidiag.job_kinds import JobError, JobKind, Option, Verdict

GATE = threading.Event()
"""Set to let the job go on past its first unit of work."""


@dataclass
class ToyConfig:
    """Settings of the toy job."""

    steps: int = 3

    def check(self) -> None:
        """Raise :class:`JobError` for a count the job cannot do."""
        if self.steps < 1:
            raise JobError(f"--steps must be at least 1, got {self.steps}")


def run(parts: Any, device: Any, config: ToyConfig, handle: Any, context: Any) -> dict[str, Any]:
    """Count ``config.steps`` units, waiting on :data:`GATE` after the first; say where it ran."""
    for done in range(1, config.steps + 1):
        handle.tick(done, config.steps)
        if done == 1 and not GATE.wait(60):
            raise JobError("the test never opened the gate")
    return {"verdict": "counted" if config.steps < 100 else "too_many", "counted": config.steps,
            "live": context.live, "model": type(parts.model).__name__}


def render(result: dict[str, Any], color: bool = False) -> str:
    """One line for the terminal and the Jobs tab."""
    return f"Toy job: counted {result['counted']} steps ({'live' if result['live'] else 'factory'}, {result['model']})"


KIND = JobKind(
    name="toy_count", command="toy-count", key="j", label="Toy count", title="the toy count",
    help="count a few steps (a test of the job registry)", config=ToyConfig, steps=lambda c: c.steps,
    describe=lambda c: f"toy count: {c.steps} steps", runner="toy_job:run", renderer="toy_job:render",
    verdict_of=lambda r: str(r.get("verdict")),
    verdicts={"counted": Verdict("counted its steps"), "too_many": Verdict("counted too many steps", negative=True)},
    options=(Option("--steps", "steps", "steps to count"),),
)
