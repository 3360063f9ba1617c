"""The interval set the reader uses to remember which flushes it has read."""

from __future__ import annotations

import numpy as np

from tuidiag.store.seqset import SeqSet


def test_ranges_merge_and_cover() -> None:
    seen = SeqSet()
    seen.add_range(0, 4)
    seen.add_range(6, 9)
    assert not seen.covers(0, 9)
    seen.add_range(5, 5)
    assert seen.covers(0, 9) and len(seen) == 10
    assert seen.overlaps(9, 20) and not seen.overlaps(10, 20)


def test_contains_mask_matches_a_plain_set() -> None:
    rng = np.random.default_rng(0)
    seen, plain = SeqSet(), set()
    for value in rng.integers(0, 200, 120).tolist():
        seen.add_range(value, value)
        plain.add(value)
    probe = np.arange(-5, 210)
    assert seen.contains_mask(probe).tolist() == [int(v) in plain for v in probe]
