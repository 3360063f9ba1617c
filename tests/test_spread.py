"""``spread_indices``: the evenly spread picks of a chart's clock and a run's wall marks."""

from __future__ import annotations

import subprocess
import sys

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tuidiag
from tests.conftest import ROOT, examples
from tuidiag.format import SUMMARIES_DIR
from tuidiag.store.spread import spread_indices


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 50_000), st.integers(0, 20_000))
def test_the_picks_are_those_of_unique_over_an_even_spacing(count: int, points: int) -> None:
    """The same picks as ``np.unique(np.linspace(...).round())``, which they replace: distinct, increasing, the
    first and the last item included, at most ``max(2, points)`` of them."""
    pick = spread_indices(count, points)
    if count == 0:
        assert len(pick) == 0
        return
    expected = np.unique(np.linspace(0, count - 1, max(2, points)).round().astype(np.int64))
    assert pick.dtype == np.int64 and np.array_equal(pick, expected)
    assert pick[0] == 0 and pick[-1] == count - 1 and len(pick) <= max(2, points)


def test_a_run_views_data_from_envelopes_imports_no_numpy_ma(tmp_path: Path) -> None:
    """Opening a run read from its envelopes (the recorder compacted its flushes into a shard with a summary)
    builds the view's data without importing ``numpy.ma`` in a fresh interpreter: ``np.unique`` did, 20 ms of
    the first frame (the clock's picks on a long run, the codes of a short run's rows). The run's diagnosis,
    queued on a thread of its own, is held: its medians import ``numpy.ma``, and under a CPU hog it once
    got there before the check."""
    run = tmp_path / "run"
    with tuidiag.Recorder(run, flush_interval=3600) as rec:
        for step in range(4_000):
            rec.step(1.0 / (step + 1))
            if step % 500 == 499:
                rec.flush()
    assert list((run / SUMMARIES_DIR).iterdir())  # read from a summary, not rows
    script = f"""
import sys, traceback
sys.path[:0] = [{str(ROOT)!r}]
class Witness:  # where numpy.ma is first imported from, printed for the failure message
    def find_spec(self, name, path=None, target=None):
        if name == "numpy.ma":
            traceback.print_stack(limit=30)
        return None
sys.meta_path.insert(0, Witness())
from pathlib import Path
from tuidiag.viewmodel.model import RunsModel
run = Path({str(run)!r})
model = RunsModel(run)
model.hold_diagnoses(3600)  # the diagnosis (a thread of its own, which may import numpy.ma) is not the view's data
model.discover()
model.refresh()
detail = model.detail(str(run))
assert detail is not None and detail.charts["loss"].clock is not None, detail
print('numpy.ma' in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", out.stderr[-6000:]  # the stack that imported it
