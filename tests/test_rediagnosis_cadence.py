"""How often the monitor re-diagnoses growing runs (``RunDiagnoses._rediagnose_after``), for any set of runs, costs,
and open view.

With no run view open, every growing run is re-diagnosed as often as the 1 % budget allows, at most
``BADGE_MAX_AGE`` apart. With a run's view open, the other runs' badges are off screen: they wait the full
``BADGE_MAX_AGE``, and the open run keeps the budget's pace, at most ``DIAGNOSIS_MAX_AGE`` apart. Over any window
the re-diagnoses that rows alone call for stay within the budget plus what the two ages force.
"""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.viewmodel.run_diagnoses import BADGE_MAX_AGE, DIAGNOSIS_BUDGET, DIAGNOSIS_MAX_AGE, RunDiagnoses
from tuidiag.viewmodel.run_slot import Diagnosed

NOW = 10_000.0


class Cadence(RunDiagnoses):
    """The model's diagnosis state alone: what ``_rediagnose_after`` reads."""

    def __init__(self, costs: dict[Path, float], focus: Path | None) -> None:
        self._diagnoses = {path: Diagnosed(0, 0, None, NOW - 1, cost) for path, cost in costs.items()}  # type: ignore[arg-type]
        self._growing = {path: NOW - 1 for path in costs}
        self._focus = (focus, NOW - 1 if focus is not None else -math.inf)


@settings(max_examples=examples(200), deadline=None)
@given(costs=st.lists(st.floats(0.0005, 2.0), min_size=1, max_size=12), open_index=st.one_of(st.none(), st.integers(0, 11)))
def test_other_badges_wait_their_longest_while_a_view_is_open(costs: list[float], open_index: int | None) -> None:
    paths = [Path(f"/runs/r{i}") for i in range(len(costs))]
    focus = paths[open_index] if open_index is not None and open_index < len(paths) else None
    cadence = Cadence(dict(zip(paths, costs)), focus)
    after = {path: cadence._rediagnose_after(NOW, path) for path in paths}
    if focus is None:
        budget = sum(costs) / DIAGNOSIS_BUDGET
        assert all(value == min(BADGE_MAX_AGE, budget) for value in after.values())
    else:
        assert after[focus] == min(DIAGNOSIS_MAX_AGE, sum(costs) / DIAGNOSIS_BUDGET)
        assert all(after[path] == BADGE_MAX_AGE for path in paths if path != focus)
    # CPU per second that rows alone call for: within the budget, or what the two ages force beyond it
    spent = sum(cost / after[path] for path, cost in zip(paths, costs))
    forced = sum(cost / DIAGNOSIS_MAX_AGE if path == focus else cost / BADGE_MAX_AGE for path, cost in zip(paths, costs))
    assert spent <= DIAGNOSIS_BUDGET + forced + 1e-12


def test_a_view_left_over_a_refresh_ago_no_longer_holds_the_badges_back() -> None:
    """Once the open view has not been refreshed for ``DIAGNOSIS_MAX_AGE`` (its view was left), badges go back to
    the budget's pace."""
    paths = [Path("/runs/a"), Path("/runs/b")]
    cadence = Cadence({paths[0]: 0.05, paths[1]: 0.05}, paths[0])
    assert cadence._rediagnose_after(NOW, paths[1]) == BADGE_MAX_AGE
    later = NOW + DIAGNOSIS_MAX_AGE + 1
    cadence._growing = {path: later - 1 for path in paths}
    assert cadence._rediagnose_after(later, paths[1]) == min(BADGE_MAX_AGE, 0.1 / DIAGNOSIS_BUDGET)
