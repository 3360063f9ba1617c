"""Full garbage collections while the monitor is idle (``tuidiag.app.idle_collection``).

The policy changes process-wide settings, so these tests check what a user's process and this suite rely on: while
an app runs, the oldest generation is collected only by the app, when a full collection is due and no input came
for a while, and cyclic garbage still goes; once every app has stopped, the thresholds are the ones from before,
whatever the order in which apps start and stop.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.app_helpers import DEMO_RUNS, fixed_clock, wait_for
from tests.conftest import examples
from tuidiag.app import idle_collection
from tuidiag.app.app import TuidiagApp
from tuidiag.app.idle_collection import OUT_OF_REACH, IdleCollection, full_collection_after


class Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _old_cyclic_garbage() -> weakref.ref[Cycle]:
    """A cycle moved to the oldest generation while alive, then dropped: young collections never reach it."""
    cycle = Cycle()
    gc.collect(1)  # it survives the young generations: it is in the oldest one now
    ref = weakref.ref(cycle)
    del cycle
    return ref


def _young_collections(count: int) -> None:
    """What allocation runs while the policy is held: young collections only (each one counts towards a full one)."""
    for _ in range(count):
        gc.collect(1)


@pytest.fixture
def settings_before() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    assert gc.get_threshold() == before  # the policy is not left held


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_old_cyclic_garbage_goes_at_the_first_quiet_tick_and_not_before(settings_before) -> None:
    clock = Clock()
    collection = IdleCollection(every=5.0, quiet=1.0, now=clock)
    assert not collection.tick()  # not started: nothing to do
    collection.start()
    try:
        assert gc.get_threshold() == (*settings_before[:2], OUT_OF_REACH)
        ref = _old_cyclic_garbage()
        clock.now += 5
        assert not collection.tick() and ref() is not None  # quiet, but CPython would not have collected yet
        _young_collections(full_collection_after())
        assert ref() is not None  # young collections never reach it
        collection.input_seen()
        clock.now += 0.5
        assert not collection.tick() and ref() is not None  # due, but a key half a second ago: not now
        clock.now += 0.6
        assert collection.tick() and ref() is None
        assert not collection.tick()  # and not again until as many young collections have run
    finally:
        collection.stop()
    collection.stop()  # twice: no effect


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=24))
def test_any_order_of_starts_and_stops_restores_the_settings(moves: list[tuple[int, bool]]) -> None:
    """Four apps' collections started and stopped in any order (twice in a row too): held while any one is started,
    and the settings from before once none is."""
    before = gc.get_threshold()
    apps = [IdleCollection() for _ in range(4)]
    try:
        for index, start in moves:
            (apps[index].start if start else apps[index].stop)()
            held = any(app._held for app in apps)
            assert (gc.get_threshold()[2] == OUT_OF_REACH) == held, moves
            assert held or gc.get_threshold() == before, moves
    finally:
        for app in apps:
            app.stop()
    assert gc.get_threshold() == before and idle_collection._users == 0


async def test_the_monitor_holds_the_policy_while_it_runs_and_collects_when_idle(settings_before) -> None:
    app = TuidiagApp(DEMO_RUNS / "vanishing-gradients", clock=fixed_clock)
    app.idle_collection.every = 0.05  # ticks often, so the test need not wait five seconds
    async with app.run_test(size=(100, 30)) as pilot:
        assert gc.get_threshold()[2] == OUT_OF_REACH
        assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None)
        await pilot.press("2")
        assert app.idle_collection.last_input > 0  # a key counts as input
        ref = _old_cyclic_garbage()
        _young_collections(full_collection_after())  # a full collection is due now
        assert await wait_for(pilot, lambda: ref() is None, timeout=30)  # by the app's own tick: none other runs
